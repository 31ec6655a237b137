"""A decoded call list, checked: each call validated against its schema, contract calls
enforced and repaired, a call that needs what nobody gave (or that repeats, unasked, one an
earlier exchange made) turned into a question, and so are calls that pass over what the
user's newest message means without saying it (server/dialogue/unsaid.py); each call
annotated for the execution layer: a write call's idempotency key (server-generated, one
per call, never decoded) and the approval marker of a tool the policy puts under
`approval_required`, naming the exact fields to approve."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from contracts import Contract
from grammars import optional_at, required_at
from server.dialogue import Grounding, NeedsInput, Wording
from server.dialogue.marks import nulls_at, pointer_of
from server.errors import ContractViolation, OutputInvalid, ServiceError
from server.execution import RequestTrace, new_call_key, with_call_key
from server.execution.policy import Verdict
from server.metrics import Metrics
from server.pipeline.answer import Call, RepairUsage
from server.pipeline.checking.audit import Decision
from server.pipeline.checking.repair import Repair, RepairAsk, Repairer, collected
from server.pipeline.plan import Plan
from server.pipeline.prepared import CallContext
from server.pipeline.validation import new_call_id, parse_json, validate

APPROVAL_HEADER = "X-StrictCall-Approval-Required"


@dataclass(frozen=True)
class CheckedCalls:
    calls: tuple[Call, ...]
    extension: dict[str, Any] | None
    repair: RepairUsage = RepairUsage()


@dataclass(frozen=True)
class Asking:
    """The calls cannot be made yet: a question (and what the repairs it took cost)."""

    needs: NeedsInput
    repair: RepairUsage = RepairUsage()


class CallChecks:
    def __init__(self, repairer: Repairer, metrics: Metrics | None) -> None:
        self.repairer = repairer
        self.metrics = metrics

    async def check(self, plan: Plan, context: CallContext, calls_text: str,
                    audit: Decision | None, *, ids: Mapping[int, str]
                    ) -> CheckedCalls | Asking:
        """The decoded calls, validated (contracts repaired), and the extension that reports
        the contracts' checks and the execution layer's notes on each call; or the question
        the first call that needs input asks. `ids`: calls that already have one (a stream
        gave it), by index."""
        calls, reports, notes = [], [], []
        spent = RepairUsage()
        for index, call in enumerate(parse_json(calls_text)):
            name, arguments = call["name"], call["arguments"]
            context.trace.event("tool_call_decoded", tool=name)
            if audit is not None:
                audit.call(name, arguments)
            if context.dialogue is not None:  # a session: filled values merged, changes held
                held = context.dialogue.merge(name, arguments)
                if isinstance(held, NeedsInput):
                    return Asking(held, spent)
                arguments = held
            contract = plan.contracts.get(name)
            if context.dialogue is not None:  # the same call again, unasked: asked first
                again = context.dialogue.repeats(name, arguments, plan.schemas.get(name, {}),
                                                 contract)
                if again is not None:
                    return Asking(again, spent)
            grounding = plan.groundings.get(name, Grounding())
            repeated = grounding.repeated(arguments)  # one saying, one field: asked
            arguments = {k: None if (k,) in repeated else v for k, v in arguments.items()}
            wording = context.dialogue.wording(name) if context.dialogue is not None \
                else Wording(grounding.language)
            call_id = ids.get(index) or new_call_id()
            key = new_call_key(contract, context.caller.headers)
            checked: dict[str, Any] | NeedsInput | Repair
            if contract is None:
                checked = self._client(plan, name, arguments, grounding, wording,
                                       context.trace, repeated)
            else:
                checked = await self._enforce(plan, context, contract, arguments, audit, key,
                                              wording)
            if isinstance(checked, Repair):
                spent = _plus(spent, checked.usage)
                if checked.questions:
                    return Asking(self._asking(contract, checked, wording, context), spent)
                arguments = checked.arguments or {}
                reports.append({"tool": name, "repaired": checked.repaired,
                                "attempts": len(checked.attempts)})
            elif isinstance(checked, NeedsInput):
                return Asking(checked, spent)
            else:
                arguments = checked
            note = _note(call_id, name, key, arguments, context.offer.verdicts.get(name))
            if note is not None:
                notes.append(note)
            calls.append(Call(call_id, name, json.dumps(arguments, ensure_ascii=False,
                                                        separators=(",", ":"))))
        if context.dialogue is not None:  # what the user left unsaid, passed over: asked
            unsaid = context.dialogue.unsaid(
                [(c.name, json.loads(c.arguments)) for c in calls], plan.schemas,
                plan.groundings)
            if unsaid is not None:
                return Asking(unsaid, spent)
        return CheckedCalls(tuple(calls), _extension(reports, notes, audit), spent)

    def _client(self, plan: Plan, name: str, arguments: dict[str, Any], grounding: Grounding,
                wording: Wording, trace: RequestTrace, repeated: tuple[tuple[str, ...], ...]
                ) -> dict[str, Any] | NeedsInput:
        """A client tool's call against its schema; fields left "not given" that the schema
        requires, or that repeated another's value (`repeated`), are asked for; the rest
        are left out."""
        given, absent = _schema_check(plan.schemas[name], name, arguments, grounding, trace,
                                      asked=repeated)
        if absent:
            return NeedsInput(name, tuple(wording.missing(path, at=at) for path, at in absent),
                              given, wording.language)
        trace.event("validated", tool=name)
        return given

    async def _enforce(self, plan: Plan, context: CallContext, contract: Contract,
                       arguments: dict[str, Any], audit: Decision | None,
                       key: str | None, wording: Wording) -> Repair:
        grounding = plan.groundings.get(contract.name, Grounding())
        _schema_check(plan.schemas[contract.name], contract.name, arguments, grounding,
                      context.trace)
        runtime = with_call_key(contract, dict(context.runtime[contract.name]), key,
                                context.caller.headers)
        ask = RepairAsk(plan.written[contract.name], grounding, wording,
                        list(context.messages), runtime, context.repair, context.charge,
                        context.dialogue.evidence.today if context.dialogue else None)
        report = await self.repairer.run(contract, arguments, ask)
        if audit is not None:
            audit.contract(contract, report.attempts, report.arguments, report.repaired)
        self._count(contract, report)
        if report.arguments is None and not report.questions:
            last = report.attempts[-1].violations
            error = ContractViolation(
                f"the call to {contract.name!r} broke its contract after "
                f"{len(report.attempts)} attempt(s): {last[0].message}",
                extensions={"violations": [v.as_dict() for v in last],
                            "attempts": [a.as_dict() for a in report.attempts]})
            _rejected(context.trace, contract.name, error)
            raise error
        context.trace.event("asked" if report.questions else "repaired" if report.repaired
                            else "validated", tool=contract.name,
                            attempts=len(report.attempts))
        return report

    def _count(self, contract: Contract, report: Repair) -> None:
        if self.metrics is None:
            return
        outcome = "needs_input" if report.questions else "failed" \
            if report.arguments is None else "repaired" if report.repaired else "valid"
        first = report.attempts[0].violations
        self.metrics.contract(tool=contract.name, outcome=outcome, first_valid=not first,
                              violations=[(v.code, v.pointer) for a in report.attempts
                                          for v in a.violations],
                              repair_tokens=report.usage.prompt_tokens
                              + report.usage.completion_tokens)

    @staticmethod
    def _asking(contract: Contract | None, report: Repair, wording: Wording,
                context: CallContext) -> NeedsInput:
        assert contract is not None  # only contract calls are repaired
        broken = {v.pointer.split("/")[1] for v in report.attempts[-1].violations
                  if v.pointer.startswith("/")}
        asked = {q.field.split("/")[1] for q in report.questions}
        today = context.dialogue.evidence.today if context.dialogue is not None else None
        kept = collected(report.last, contract, leave_out=broken | asked, today=today)
        return NeedsInput(contract.name, tuple(report.questions), kept, wording.language)


def _schema_check(schema: dict[str, Any], name: str, arguments: dict[str, Any],
                  grounding: Grounding, trace: RequestTrace,
                  asked: tuple[tuple[str, ...], ...] = ()
                  ) -> tuple[dict[str, Any], list[tuple[tuple[str, ...], str]]]:
    """The arguments checked against the tool's schema, fields left "not given" (null, at
    any depth) out of them and out of `required` (the questions deal with those): (the
    given ones, the required ones not given, and those the user asked for without a value
    (`Grounding.wanted`) or that are `asked`: each field's path and JSON Pointer). A 422
    for anything else the schema refuses."""
    given, nulls = nulls_at(arguments, grounding.asked)
    absent = [(path, at) for path, at in nulls
              if required_at(schema, path) or path in grounding.wanted or path in asked]
    for path in grounding.wanted_arrays:
        if not _value_at(given, path):  # written empty, or left out
            absent.append((path, pointer_of(path)))
            if len(path) == 1:
                given.pop(path[0], None)
    checked = optional_at(schema, [path for path, _ in nulls]) if nulls else schema
    try:
        validate(checked, given, where=f"arguments of {name!r}")
    except OutputInvalid as exc:
        _rejected(trace, name, exc)
        raise
    return given, absent


def _value_at(arguments: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(arguments, dict):
            return None
        arguments = arguments.get(key)
    return arguments


def _plus(a: RepairUsage, b: RepairUsage) -> RepairUsage:
    return RepairUsage(a.attempts + b.attempts, a.prompt_tokens + b.prompt_tokens,
                       a.completion_tokens + b.completion_tokens)


def _extension(reports: list[dict[str, Any]], notes: list[dict[str, Any]],
               audit: Decision | None) -> dict[str, Any] | None:
    extension: dict[str, Any] = {}
    if reports:
        extension = {"contracts": reports, "repaired": any(r["repaired"] for r in reports)}
    if notes:
        extension["calls"] = notes
        if audit is not None:
            audit.record["call_notes"] = notes
    return extension or None


def _note(call_id: str, name: str, key: str | None, arguments: dict[str, Any],
          verdict: Verdict | None) -> dict[str, Any] | None:
    note: dict[str, Any] = {"id": call_id, "tool": name}
    if key is not None:
        note["idempotency_key"] = key
    if verdict is not None and verdict.decision == "approval_required":
        fields = verdict.approve_fields or tuple(arguments)
        note["approval_required"] = {
            "fields": {f: arguments.get(f) for f in fields}, "rule": verdict.rule,
            "how": "a caller the policy allows this tool invokes it with these arguments "
                   "and idempotency key (POST /v1/tools/{name}/invoke)"}
    return note if len(note) > 2 else None


def approval_header(extension: dict[str, Any] | None) -> dict[str, str]:
    waiting = [n["id"] for n in (extension or {}).get("calls", ())
               if "approval_required" in n]
    return {APPROVAL_HEADER: ", ".join(waiting)} if waiting else {}


def _rejected(trace: RequestTrace, tool: str, error: ServiceError) -> None:
    trace.event("rejected", tool=tool, status=error.status, detail=error.detail[:300])
