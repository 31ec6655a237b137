"""Post-decode checks on a finished decode, shared by the plain and the streaming paths:
the decoded text read in the model's format, calls validated (contracts repaired), a JSON
answer validated, a cut-off never passed off as complete, and the audit record written."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, assert_never

from grammars import GrammarCache, GrammarPolicy
from server.dialogue import NeedsInput
from server.engines.base import Engine, GenerationResult
from server.errors import OutputInvalid, ServiceError
from server.formats.base import ModelFormat
from server.formats.reading import Reading
from server.metrics import Metrics
from server.pipeline.answer import Answer, Call, Finish, RepairUsage
from server.pipeline.checking.audit import AuditSink, Decision
from server.pipeline.checking.calls import Asking, CallChecks, CheckedCalls, approval_header
from server.pipeline.checking.repair import Repairer
from server.pipeline.guards.runaway import Trip
from server.pipeline.plan import Plan
from server.pipeline.prepared import Decode, Prepared
from server.pipeline.usage import usage_of
from server.pipeline.validation import parse_json, validate


@dataclass(frozen=True)
class Checked:
    """A decode's answer, checked."""

    content: str | None
    calls: tuple[Call, ...]
    finish: Finish
    reasoning: str | None = None
    stop_string: str | None = None
    # The `strictcall` extension: the contracts' checks, the execution layer's notes on
    # each call, the tools the request could see, what a runaway guard did, the question.
    extension: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    repair: RepairUsage = RepairUsage()  # what the repair decodes took
    # A question instead of the calls (the extension's `needs_input` is its wire form).
    question: NeedsInput | None = None


class Finisher:
    def __init__(self, engine: Engine, calls: CallChecks, audit: AuditSink | None, *,
                 model: str) -> None:
        self.engine = engine
        self.calls = calls
        self.audit = audit
        self.model = model

    @classmethod
    def build(cls, engine: Engine, cache: GrammarCache, policy: GrammarPolicy,
              fmt: ModelFormat, *, metrics: Metrics | None, audit: AuditSink | None,
              model: str, compile_timeout_s: float) -> Finisher:
        """The checks with their repair loop, over the server's engine, cache and format."""
        repairer = Repairer(engine, cache, policy, fmt, compile_timeout_s=compile_timeout_s)
        return cls(engine, CallChecks(repairer, metrics), audit, model=model)

    async def finish(self, prepared: Prepared, step: Decode, result: GenerationResult,
                     trip: Trip | None, *, call_ids: Mapping[int, str] | None = None
                     ) -> Checked:
        plan, context = step.plan, prepared.context
        complete = result.grammar_complete or plan.spec is None
        audit = self._decision(prepared, step, result, trip)
        try:
            reading = plan.reader.read(result.text, complete=complete)
            if complete and reading.calls is not None:
                found = await self.calls.check(plan, context, reading.calls, audit,
                                               ids=call_ids or {})
                checked = _checked(found, reading.content)
            else:
                checked = self._answer(plan, step, result, reading, complete=complete)
        except ServiceError as exc:  # a 422, or a failed repair decode (503)
            if audit is not None:
                audit.rejected(exc)
            context.trace.end(error=exc.slug)
            raise
        extension = dict(checked.extension or {})
        tools = context.offer.extension()
        if tools is not None:
            extension["tools"] = tools
        if trip is not None:
            extension["runaway"] = trip.note
        if checked.repair.attempts:
            extension["repair"] = asdict(checked.repair)
        asked = checked.question.as_dict() if checked.question is not None else None
        if context.dialogue is not None:  # a session: its slots saved, and reported
            slots = await context.dialogue.settle(dict(plan.schemas), checked.calls, asked)
            if slots is not None:
                extension["slots"] = slots
        if audit is not None:
            audit.tool_set(context.offer)
            audit.finished(checked.calls, checked.finish, complete=complete,
                           needs_input=asked)
        context.trace.end()
        return replace(checked, reasoning=reading.reasoning, extension=extension or None,
                       headers=approval_header(extension))

    def answered(self, prepared: Prepared, step: Decode, checked: Checked,
                 results: Sequence[GenerationResult]) -> Answer:
        """The typed answer the APIs render, with the usage of every decode it took."""
        return Answer(id=prepared.id, created=prepared.created, model=self.model,
                      content=checked.content, calls=checked.calls, finish=checked.finish,
                      usage=usage_of(self.engine, step.plan, results, repair=checked.repair),
                      reasoning=checked.reasoning, stop_string=checked.stop_string,
                      extension=checked.extension, headers=checked.headers)

    def _decision(self, prepared: Prepared, step: Decode, result: GenerationResult,
                  trip: Trip | None) -> Decision | None:
        if self.audit is None or not prepared.task.tools:
            return None
        return Decision(self.audit, caller=prepared.context.caller, model=self.model,
                        offered=prepared.task.tool_names(),
                        lookup=step.decided_by or step.lookup, contracts=step.plan.contracts,
                        result=result, runaway=trip.note if trip is not None else None)

    def _answer(self, plan: Plan, step: Decode, result: GenerationResult, reading: Reading,
                *, complete: bool) -> Checked:
        """Text, JSON, and every cut-off output."""
        if not complete:
            # A cut-off constrained output is finish_reason "length": never a call, never a
            # "stop" that would suggest it is complete, and never the format's own syntax
            # (a half-written `<tool_call>{...`, which a chat client would show): the text
            # the reader would have streamed, what came before any call (a cut-off JSON
            # answer is that text; the reasoning is its own field).
            return Checked(plan.reader.showable(result.text, stop_holdback=0), (), "length")
        content = reading.content if reading.content is not None else ""
        match plan.mode:
            case "text" | "auto":
                if result.finish_reason == "length":
                    return Checked(content, (), "length")
                return Checked(content, (), "stop",
                               stop_string=self._stop_string(step, result, content))
            case "json":
                validate(plan.schemas[""], parse_json(content), where="the response")
                return Checked(content, (), "stop")
            case "tools":  # a complete call array always reads as calls
                raise OutputInvalid("the decode completed the call grammar but no call was "
                                    "read")
            case _:
                assert_never(plan.mode)

    def _stop_string(self, step: Decode, result: GenerationResult,
                     content: str) -> str | None:
        """Which stop string ended the text, if one did. Engines cut the text before it but
        keep its tokens, so it starts what the tokens say beyond the text."""
        stops = step.request.sampling.stop
        if not stops or result.text != content:
            return None
        rest = self.engine.decode(result.token_ids)[len(result.text):]
        return next((stop for stop in stops if rest.startswith(stop)), None)


def _checked(found: CheckedCalls | Asking, content: str | None) -> Checked:
    """The calls, or the question asked instead of them (the model's text before the calls
    is no answer to it, so only the question is said)."""
    if isinstance(found, Asking):
        return Checked(found.needs.text(), (), "stop",
                       extension={"needs_input": found.needs.as_dict()}, repair=found.repair,
                       question=found.needs)
    return Checked(content, found.calls, "tool_calls", extension=found.extension,
                   repair=found.repair)
