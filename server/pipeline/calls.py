"""A decoded call list, checked: each call validated against its schema, contract calls
enforced and repaired, and each call annotated for the execution layer: a write call's
idempotency key (server-generated, one per call, never decoded) and the approval marker of
a tool the policy puts under `approval_required`, naming the exact fields to approve."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from contracts import Contract
from server.errors import ContractViolation, ServiceError
from server.execution import RequestTrace, new_call_key, with_call_key
from server.execution.policy import Verdict
from server.metrics import Metrics
from server.pipeline.answer import Call
from server.pipeline.audit import Decision
from server.pipeline.plan import Plan
from server.pipeline.prepared import CallContext
from server.pipeline.repair import Repairer
from server.pipeline.validation import new_call_id, parse_json, validate

APPROVAL_HEADER = "X-StrictCall-Approval-Required"


class CallChecks:
    def __init__(self, repairer: Repairer, metrics: Metrics | None) -> None:
        self.repairer = repairer
        self.metrics = metrics

    async def check(self, plan: Plan, context: CallContext, calls_text: str,
                    audit: Decision | None, *, ids: Mapping[int, str]
                    ) -> tuple[tuple[Call, ...], dict[str, Any] | None]:
        """The decoded calls, validated (contracts repaired), and the extension that reports
        the contracts' checks and the execution layer's notes on each call. `ids`: calls
        that already have one (a stream gave it), by index."""
        calls, reports, notes = [], [], []
        trace = context.trace
        for index, call in enumerate(parse_json(calls_text)):
            name, arguments = call["name"], call["arguments"]
            trace.event("tool_call_decoded", tool=name)
            if audit is not None:
                audit.call(name, arguments)
            try:
                validate(plan.schemas[name], arguments, where=f"arguments of {name!r}")
            except ServiceError as exc:
                _rejected(trace, name, exc)
                raise
            contract = plan.contracts.get(name)
            call_id, key = ids.get(index) or new_call_id(), new_call_key(contract)
            if contract is not None:
                arguments, report = await self._enforce(context, contract, arguments, audit,
                                                        key)
                reports.append(report)
            else:
                trace.event("validated", tool=name)
            note = _note(call_id, name, key, arguments, context.offer.verdicts.get(name))
            if note is not None:
                notes.append(note)
            calls.append(Call(call_id, name, json.dumps(arguments, ensure_ascii=False,
                                                        separators=(",", ":"))))
        extension: dict[str, Any] = {}
        if reports:
            extension = {"contracts": reports,
                         "repaired": any(r["repaired"] for r in reports)}
        if notes:
            extension["calls"] = notes
            if audit is not None:
                audit.record["call_notes"] = notes
        return tuple(calls), extension or None

    async def _enforce(self, context: CallContext, contract: Contract,
                       arguments: dict[str, Any], audit: Decision | None,
                       key: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
        runtime = with_call_key(contract, dict(context.runtime[contract.name]), key,
                                context.caller.headers)
        report = await self.repairer.run(contract, arguments, messages=list(context.messages),
                                         runtime=runtime, budget=context.repair)
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
            _rejected(context.trace, contract.name, error)
            raise error
        context.trace.event("repaired" if report.repaired else "validated",
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


def _rejected(trace: RequestTrace, tool: str, error: ServiceError) -> None:
    trace.event("rejected", tool=tool, status=error.status, detail=error.detail[:300])
