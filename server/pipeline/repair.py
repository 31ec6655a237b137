"""The bounded repair loop for contract calls.

Fields that passed are frozen. Only the failing fields are decoded again, under a grammar
for just those fields (narrowed to the allowed values when a violation lists them), with the
violations in the prompt. Bounded by attempts and wall time; every attempt is kept."""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import json
import time
from dataclasses import dataclass, field
from typing import Any

from contracts import Contract, Violation
from grammars import GrammarCache, GrammarError, GrammarPolicy
from server.engines.base import Engine, GenerationRequest, SamplingParams
from server.errors import InvalidRequest
from server.formats.base import ModelFormat
from server.pipeline.decode import compiled, decode
from server.pipeline.request_options import RepairBudget
from server.task import EarlierCall, Turn

REPAIR_MAX_TOKENS = 256

@dataclass
class Repair:
    """Every attempt (the first decode included) with its arguments and violations."""

    attempts: list[dict[str, Any]] = field(default_factory=list)
    arguments: dict[str, Any] | None = None  # normalized, once valid

    @property
    def repaired(self) -> bool:
        return self.arguments is not None and len(self.attempts) > 1

    def record(self, arguments: Any, violations: tuple[Violation, ...], note: str = "") -> None:
        entry = {"arguments": arguments, "violations": [v.as_dict() for v in violations]}
        if note:
            entry["note"] = note
        self.attempts.append(entry)


class Repairer:
    def __init__(self, engine: Engine, cache: GrammarCache, policy: GrammarPolicy,
                 fmt: ModelFormat, *, compile_timeout_s: float = 10.0) -> None:
        self.engine = engine
        self.cache = cache
        self.policy = policy  # the server's: a repair grammar follows the same policies
        self.format = fmt  # the earlier call is written back in the model's own syntax
        self.compile_timeout_s = compile_timeout_s

    async def run(self, contract: Contract, arguments: dict[str, Any], *,
                  messages: list[dict[str, Any]], runtime: dict[str, Any], budget: RepairBudget,
                  today: dt.date | None = None) -> Repair:
        report = Repair()
        outcome = contract.validate(arguments, runtime=runtime, today=today)
        report.record(arguments, outcome.violations)
        deadline = time.monotonic() + budget.seconds
        while not outcome.valid and len(report.attempts) <= budget.attempts:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            fixed = await self._attempt(contract, arguments, outcome.violations, messages, left)
            if fixed is None:
                report.record(arguments, outcome.violations,
                              note="the repair decode ran out of time or tokens")
                continue
            arguments = {**arguments, **fixed}
            outcome = contract.validate(arguments, runtime=runtime, today=today)
            report.record(arguments, outcome.violations)
        report.arguments = outcome.arguments
        return report

    async def _attempt(self, contract: Contract, arguments: dict[str, Any],
                       violations: tuple[Violation, ...], messages: list[dict[str, Any]],
                       seconds: float) -> dict[str, Any] | None:
        schema = repair_schema(contract.schema(), violations)
        try:
            spec = self.policy.json_schema_spec(schema, where=f"the repair of {contract.name!r}")
            lookup = await compiled(self.cache, spec,
                                    timeout_s=min(seconds, self.compile_timeout_s))
        except (GrammarError, InvalidRequest):
            return None  # recorded as an attempt that could not be made
        # The call as the model wrote it, in its own syntax, then what is wrong with it.
        prompt = messages + self.format.messages([
            Turn("assistant", "", (EarlierCall("call_0", contract.name, arguments),)),
            Turn("user", feedback(contract.name, violations, schema))])
        ids = self.engine.encode(self.engine.render_chat(
            prompt, **self.format.template_kwargs(reasoning=False)))
        request = GenerationRequest(ids, SamplingParams(max_tokens=REPAIR_MAX_TOKENS),
                                    lookup.grammar)
        try:
            result = await asyncio.wait_for(decode(self.engine, request), timeout=seconds)
        except TimeoutError:
            return None
        if not result.grammar_complete:
            return None
        return json.loads(result.text)


def feedback(tool: str, violations: tuple[Violation, ...], schema: dict[str, Any]) -> str:
    fields = ", ".join(schema["properties"])
    lines = "\n".join(v.feedback() for v in violations)
    return (f"The call to {tool} is not valid yet:\n{lines}\n"
            f"Answer only with a JSON object holding corrected values for: {fields}.")


def repair_schema(schema: dict[str, Any], violations: tuple[Violation, ...]) -> dict[str, Any]:
    """An object of just the failing top-level fields, each narrowed by what its violation
    allows; every field is required, since each must be written again."""
    props = schema.get("properties", {})
    failing = [v for v in violations if v.field in props] or \
        [Violation(f"/{name}", "cross_field", None, None, "") for name in props]
    out_props: dict[str, Any] = {}
    for v in failing:
        out_props[v.field] = _narrow(copy.deepcopy(props[v.field]), v)  # type: ignore[index]
    out: dict[str, Any] = {"type": "object", "properties": out_props,
                           "required": list(out_props), "additionalProperties": False}
    if "$defs" in schema:
        out["$defs"] = copy.deepcopy(schema["$defs"])
    return out


def _narrow(node: dict[str, Any], violation: Violation) -> dict[str, Any]:
    allowed = violation.allowed
    if isinstance(allowed, list) and allowed and all(
            isinstance(a, (str, int, float, bool)) for a in allowed):
        return {"enum": allowed}  # the only values that can pass: the grammar enforces them
    if violation.observed is None and isinstance(node.get("anyOf"), list):
        # A missing value must now be written: drop the `null` branch of an optional field.
        kept = [b for b in node["anyOf"] if b.get("type") != "null"]
        if kept:
            node["anyOf"] = kept
            node.pop("default", None)
            if len(kept) == 1:
                merged = {k: v for k, v in node.items() if k != "anyOf"}
                return {**merged, **kept[0]}
    return node
