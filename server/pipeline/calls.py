"""A decoded call list, checked: each call validated against its schema, contract calls
enforced and repaired, and each call annotated for the execution layer: a write call's
idempotency key (server-generated, one per call, never decoded) and the approval marker of
a tool the policy puts under `approval_required`, naming the exact fields to approve."""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

from contracts import Contract
from grammars import validator_for
from server.errors import ContractViolation, OutputInvalid, ServiceError
from server.execution import RequestTrace, new_call_key, with_call_key
from server.execution.policy import Verdict
from server.metrics import Metrics
from server.pipeline.audit import Decision
from server.pipeline.repair import Repairer
from server.protocol import Choice, FunctionCall, ResponseMessage, ToolCall

if TYPE_CHECKING:
    from server.pipeline.chat import Prepared

APPROVAL_HEADER = "X-StrictCall-Approval-Required"


class CallChecks:
    def __init__(self, repairer: Repairer, metrics: Metrics | None) -> None:
        self.repairer = repairer
        self.metrics = metrics

    async def choice(self, prep: Prepared, calls_text: str, content: str | None,
                     audit: Decision | None) -> tuple[Choice, dict[str, Any] | None]:
        calls, reports, notes = [], [], []
        trace = prep.trace
        for call in parse_json(calls_text):
            name, arguments = call["name"], call["arguments"]
            if trace is not None:
                trace.event("tool_call_decoded", tool=name)
            if audit is not None:
                audit.call(name, arguments)
            try:
                validate(prep.plan.schemas[name], arguments, where=f"arguments of {name!r}")
            except ServiceError as exc:
                _rejected(trace, name, exc)
                raise
            contract = prep.plan.contracts.get(name)
            call_id, key = new_call_id(), new_call_key(contract)
            if contract is not None:
                arguments, report = await self._enforce(prep, contract, arguments, audit, key)
                reports.append(report)
            elif trace is not None:
                trace.event("validated", tool=name)
            note = _note(call_id, name, key, arguments,
                         prep.offer.verdicts.get(name) if prep.offer is not None else None)
            if note is not None:
                notes.append(note)
            calls.append(ToolCall(id=call_id, function=FunctionCall(
                name=name, arguments=json.dumps(arguments, ensure_ascii=False,
                                                separators=(",", ":")))))
        choice = Choice(index=0, message=ResponseMessage(content=content, tool_calls=calls),
                        finish_reason="tool_calls")
        extension: dict[str, Any] = {}
        if reports:
            extension = {"contracts": reports,
                         "repaired": any(r["repaired"] for r in reports)}
        if notes:
            extension["calls"] = notes
            if audit is not None:
                audit.record["call_notes"] = notes
        return choice, extension or None

    async def _enforce(self, prep: Prepared, contract: Contract, arguments: dict[str, Any],
                       audit: Decision | None,
                       key: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
        runtime = with_call_key(contract, prep.runtime[contract.name], key,
                                prep.caller.headers if prep.caller is not None else {})
        report = await self.repairer.run(contract, arguments, messages=prep.messages,
                                         runtime=runtime, budget=prep.budget)
        if audit is not None:
            audit.contract(contract, report.attempts, report.arguments, report.repaired)
        if self.metrics is not None:
            outcome = "failed" if report.arguments is None else \
                "repaired" if report.repaired else "valid"
            self.metrics.contract(tool=contract.name, outcome=outcome, violation_codes=[
                v["code"] for a in report.attempts for v in a["violations"]])
        if report.arguments is None:
            last = report.attempts[-1]["violations"]
            error = ContractViolation(
                f"the call to {contract.name!r} broke its contract after "
                f"{len(report.attempts)} attempt(s): {last[0]['message']}",
                extensions={"violations": last, "attempts": report.attempts})
            _rejected(prep.trace, contract.name, error)
            raise error
        if prep.trace is not None:
            prep.trace.event("repaired" if report.repaired else "validated",
                             tool=contract.name, attempts=len(report.attempts))
        return report.arguments, {"tool": contract.name, "repaired": report.repaired,
                                  "attempts": len(report.attempts)}


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


def _rejected(trace: RequestTrace | None, tool: str, error: ServiceError) -> None:
    if trace is not None:
        trace.event("rejected", tool=tool, status=error.status, detail=error.detail[:300])


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def parse_json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:  # the grammar makes this unreachable; say so if not
        raise OutputInvalid(f"decoded output is not JSON ({exc.msg} at {exc.pos})") from None


def validate(schema: dict[str, Any], value: Any, *, where: str) -> None:
    errors = sorted(validator_for(schema).iter_errors(value),
                    key=lambda e: list(e.absolute_path))
    if errors:
        violations = [{"pointer": "/" + "/".join(str(p) for p in e.absolute_path),
                       "message": e.message} for e in errors]
        raise OutputInvalid(f"{where} failed validation: {violations[0]['message']}",
                            extensions={"violations": violations})
