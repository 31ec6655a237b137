"""Audit records: one per tool-call decision the chat pipeline makes, whichever API the
request came through (chat completions, Responses, Messages all finish in
`ChatPipeline.finish`).

A record says who asked (the key's name, tenant and roles; never the key, never a header),
which tools were offered, the grammar that constrained the decode, the calls decoded, every
validation and repair attempt with its violations, the outcome and the timings:

    outcome  valid     calls returned as decoded (after validation)
             repaired  calls returned after at least one repair
             needs_input  a question instead of a call (a value nobody gave, or to confirm)
             rejected  a 422: output or contract validation failed (error says which)
             failed    another error ended the checks (a repair decode's engine failure)
             cut_off   the constrained output was cut (max_tokens, context, a loop guard)
             no_call   the model answered without a call (tool_choice "auto" or "none")

Values of contract fields marked `Redact()` are "[redacted]" wherever they would show: in
the arguments, in violations' observed values and in messages that quote them."""

from __future__ import annotations

import datetime as dt
import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol

from contracts import Contract
from grammars import Lookup
from server.dialogue.values import leaves
from server.engines.base import GenerationResult
from server.errors import ServiceError
from server.execution import Offer
from server.identity import Caller
from server.pipeline.answer import Call, Finish
from server.pipeline.checking.repair import Attempt

log = logging.getLogger("strictcall.audit")
Outcome = Literal["valid", "repaired", "rejected", "failed", "cut_off", "no_call",
                  "needs_input"]
REDACTED = "[redacted]"


class AuditSink(Protocol):
    """Where records go (server.logs.AuditLog, or a list in tests)."""

    def write(self, record: dict[str, Any]) -> None: ...


class Decision:
    """Collects one decision while `finish` makes it, then writes its record once."""

    def __init__(self, sink: AuditSink, *, caller: Caller | None, model: str,
                 offered: Iterable[str], lookup: Lookup | None,
                 contracts: Mapping[str, Contract], result: GenerationResult,
                 runaway: dict[str, Any] | None) -> None:
        """`runaway`: what a runaway guard did (its note), if it stopped the decode."""
        self._sink = sink
        self._contracts = contracts
        self._started = time.perf_counter()
        self._secrets: set[str] = set()
        self._tool = ""  # the call being checked: a rejection is about it
        identity = caller.identity if caller is not None else None
        self.record: dict[str, Any] = {
            "time": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "request_id": caller.request_id if caller is not None else None,
            "identity": None if identity is None else {
                "name": identity.name, "tenant": identity.tenant,
                "roles": list(identity.roles)},
            "model": model, "tools_offered": list(offered),
            "grammar": None if lookup is None else {
                "key": lookup.grammar.spec.key, "cache": lookup.state},
            "calls": [], "contracts": [], "outcome": None, "finish_reason": None,
            "error": None, "runaway": self._unquoted(runaway),
            "timings": {k: round(v, 6) for k, v in result.timings.items()
                        if k.endswith("_s")},
            "tokens": {"prompt": result.prompt_tokens,
                       "completion": result.completion_tokens}}

    def call(self, name: str, arguments: Any) -> None:
        """A call as decoded, before validation."""
        self._tool = name
        self.record["calls"].append({"name": name,
                                     "arguments": self._hide(name, arguments, "")})

    def contract(self, contract: Contract, attempts: Sequence[Attempt],
                 arguments: dict[str, Any] | None, repaired: bool) -> None:
        """A contract's validation and repair: every attempt with its violations, and the
        arguments returned (None: none passed)."""
        self.record["contracts"].append({
            "tool": contract.name, "repaired": repaired,
            "attempts": [{**(shown := attempt.as_dict()),
                          "arguments": self._hide(contract.name, attempt.arguments, ""),
                          "violations": self._violations(contract.name, shown["violations"])}
                         for attempt in attempts],
            "arguments": None if arguments is None
            else self._hide(contract.name, arguments, "")})

    def tool_set(self, offer: Offer | None) -> None:
        """The execution layer's decisions before decoding: the tools the request could
        see (after policy and selection) and each one's policy decision."""
        if offer is None or not offer.reported:
            return
        self.record["tool_set"] = {
            **(offer.extension() or {}), "principal": offer.principal.as_dict(),
            "policy": {name: v.as_dict() for name, v in offer.verdicts.items()}}

    def finished(self, calls: tuple[Call, ...], finish: Finish, *, complete: bool,
                 needs_input: dict[str, Any] | None = None) -> None:
        """`needs_input`: the question asked instead of a call (its fields, no values)."""
        if calls:
            repaired = any(c["repaired"] for c in self.record["contracts"])
            outcome: Outcome = "repaired" if repaired else "valid"
        elif needs_input is not None:
            outcome = "needs_input"
            self.record["needs_input"] = {
                "tool": needs_input["tool"],
                "fields": [m["field"] for m in needs_input.get("missing", [])]
                + [c["field"] for c in needs_input.get("confirm", [])]}
        else:
            outcome = "no_call" if complete else "cut_off"
        self._write(outcome, finish)

    def rejected(self, error: ServiceError) -> None:
        problem = {"status": error.status, "type": error.slug,
                   "detail": self._scrub(error.detail)}
        violations = error.extensions.get("violations")
        if violations is not None:
            problem["violations"] = self._violations(self._tool, violations)
        self.record["error"] = problem
        self._write("rejected" if error.status == 422 else "failed", None)

    def _write(self, outcome: Outcome, finish_reason: str | None) -> None:
        self.record["outcome"] = outcome
        self.record["finish_reason"] = finish_reason
        self.record["timings"]["checks_s"] = round(time.perf_counter() - self._started, 6)
        # Last: a message may quote a redacted value from any attempt.
        error = self.record["error"] or {}
        for violations in [*(a["violations"] for c in self.record["contracts"]
                             for a in c["attempts"]), error.get("violations", [])]:
            for v in violations:
                v["message"] = self._scrub(v["message"])
        try:
            self._sink.write(self.record)
        except Exception:
            log.exception("could not write the audit record of this decision")

    def _unquoted(self, note: dict[str, Any] | None) -> dict[str, Any] | None:
        """A runaway note without the looping text where an offered contract redacts a
        field: the loop was cut before any call could be read, so it may be inside one."""
        cut = (note or {}).get("loop_cut")
        if note is None or not isinstance(cut, dict) or "unit" not in cut \
                or not any(c.redacted for c in self._contracts.values()):
            return note
        return {**note, "loop_cut": {**cut, "unit": REDACTED}}

    def _hide(self, tool: str, value: Any, at: str) -> Any:
        contract = self._contracts.get(tool)
        if contract is None or not contract.redacted:
            return value
        hidden = contract.redact(value, at=at)
        self._remember(value, hidden)
        return hidden

    def _violations(self, tool: str, violations: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for v in violations:
            pointer = v.get("pointer", "")
            observed = self._hide(tool, v["observed"], pointer) if "observed" in v else None
            out.append({**v, **({"observed": observed} if "observed" in v else {}),
                        "message": str(v.get("message", ""))})
        return out

    def _remember(self, value: Any, hidden: Any) -> None:
        """The values redaction took out, so messages that quote them can be scrubbed."""
        if hidden == REDACTED and value != REDACTED:
            for leaf in leaves(value):
                if isinstance(leaf, (str, int, float)) and not isinstance(leaf, bool):
                    self._secrets.add(str(leaf))
        elif isinstance(value, dict) and isinstance(hidden, dict):
            for key in value:
                self._remember(value[key], hidden.get(key))
        elif isinstance(value, list) and isinstance(hidden, list):
            for old, new in zip(value, hidden, strict=True):
                self._remember(old, new)

    def _scrub(self, text: str) -> str:
        secrets = sorted((s for s in self._secrets if s), key=len, reverse=True)
        if not secrets or not text:
            return text
        return re.sub("|".join(map(re.escape, secrets)), REDACTED, text)

