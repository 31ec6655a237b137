"""The stages after the plan, as values: a `Decode` ready to run (the prompt's ids, the grammar,
the sampling and the guards), and the narrow `CallContext` that validation, repair and the
audit need of the request. `Prepared` holds both, for one request."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from grammars import Lookup
from server.dialogue import DialogueTurn
from server.engines.base import Engine, GenerationRequest, GenerationResult, TokenCallback
from server.execution import Offer, RequestTrace
from server.formats.reading import has_content
from server.identity import Caller
from server.pipeline.answer import Opening
from server.pipeline.guards.item_loops import vocabulary_of
from server.pipeline.guards.runaway import RunawayGuard
from server.pipeline.plan import Plan
from server.pipeline.request_options import GuardOptions, RepairBudget, RequestOptions
from server.task import Task


@dataclass(frozen=True)
class Decode:
    plan: Plan
    lookup: Lookup | None  # the compiled grammar (None: unconstrained)
    request: GenerationRequest
    guards: GuardOptions
    # "auto" that decided on no call (an empty list): the decode that answers instead.
    fallback: Decode | None = None
    # A fallback's: the call grammar whose empty list chose it (for the audit record).
    decided_by: Lookup | None = None
    # The prompt as rendered: items copied from it are not loops (the runaway guard).
    prompt_text: str = ""

    def guard(self, engine: Engine) -> RunawayGuard | None:
        """A fresh runaway guard for one run of this decode (constrained decodes only)."""
        if self.plan.spec is None or not self.guards.active:
            return None
        return RunawayGuard(self.plan.reader, engine.decode, options=self.guards,
                            vocabulary=vocabulary_of(engine.tokenizer),
                            evidence=self.prompt_text, answered=self.plan.answered,
                            identifying=self.plan.identifying())

    def guarded(self, guard: RunawayGuard | None) -> GenerationRequest:
        """The request, steered by `guard` where it steers."""
        if guard is None or self.guards.loop_guard != "steer":
            return self.request
        return replace(self.request, steer=guard.steer)

    def watched(self, on_token: TokenCallback) -> Decode:
        return replace(self, request=replace(self.request, on_token=on_token))

    def then(self, result: GenerationResult) -> Decode | None:
        """What decodes next once this decode gave `result`: nothing (None), or, when
        "auto" decided on no call (an empty list, or a repeat of an answered call that the
        runaway guard dropped) and wrote no text, the fallback that answers instead."""
        if self.fallback is None or not result.grammar_complete:
            return None
        reading = self.plan.reader.read(result.text, complete=True)
        if reading.no_call and not (reading.content or "").strip():
            return self.fallback
        return None


@dataclass(frozen=True, kw_only=True)
class CallContext:
    """What the checks of decoded calls need of the request."""

    caller: Caller
    offer: Offer  # the tools this request could see, and each one's policy verdict
    trace: RequestTrace  # its OpenTelemetry span
    # Per contract: the server-filled fields (headers, the key's claims).
    runtime: Mapping[str, Mapping[str, Any]]
    repair: RepairBudget
    # The chat template's messages of the decode, which a repair prompt continues.
    messages: tuple[dict[str, Any], ...]
    # Charges tokens to the caller's key (repair decodes count as the request's own).
    charge: Callable[[int], None] | None = None
    # The conversation's turn: each call merged with a session's slots, questions worded in
    # the user's language, the slots saved with the answer (server/dialogue).
    dialogue: DialogueTurn | None = None


@dataclass(frozen=True, kw_only=True)
class Prepared:
    task: Task  # with only the tools the caller may see
    options: RequestOptions
    decode: Decode
    context: CallContext
    id: str  # the answer's, known before it is (a stream's events carry it)
    created: int

    @property
    def plan(self) -> Plan:
        return self.decode.plan

    def headers(self) -> dict[str, str]:
        """Known before decoding: the deprecation warning of an offered tool."""
        return self.context.offer.headers()

    def opening(self) -> Opening:
        """What the APIs see of this request before its answer."""
        return Opening(id=self.id, created=self.created,
                       prompt_tokens=len(self.decode.request.prompt_ids),
                       content_first=has_content(self.plan.mode), grammar=self.decode.lookup,
                       enforcement=self.plan.enforcement, headers=self.headers())
