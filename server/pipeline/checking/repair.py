"""The bounded repair loop for contract calls, honest about what it may do.

Fields that passed are frozen. Only the failing fields are decoded again, under a grammar
for just those fields (narrowed to the allowed values when a violation lists them), with the
violations in the prompt. Bounded by attempts and wall time; every attempt is kept, with the
tokens it took.

What repair never does: write a value nobody gave. A value a rule needs that is missing
(null, or left out), marked or not, is asked for (server/dialogue/questions.py), never
forced: a grounded or asked field keeps its null branch and its candidates, and an
optional field keeps its null. A `Confirm` field is never re-decoded: a violation there
asks the user. A violation that names no field (a model validator's plain `ValueError`)
re-decodes nothing: no field can be named to fix, so the call fails with its violations."""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import json
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from contracts import Contract, Violation, clock
from grammars import GrammarCache, GrammarError, GrammarPolicy
from server.dialogue import Grounding, Question, Wording
from server.dialogue.marks import path_of
from server.engines.base import Engine, GenerationRequest, GenerationResult, SamplingParams
from server.errors import InvalidRequest
from server.formats.base import ModelFormat
from server.pipeline.answer import RepairUsage
from server.pipeline.decode import Counted, compiled, decode
from server.pipeline.request_options import RepairBudget
from server.task import EarlierCall, Turn

REPAIR_MAX_TOKENS = 256


@dataclass(frozen=True)
class Attempt:
    """One decode of a contract call (the first, or a repair): what it wrote and what broke."""

    arguments: Any
    violations: tuple[Violation, ...]
    note: str = ""  # why the loop stopped here, where it did

    def as_dict(self) -> dict[str, Any]:
        """As problems and the audit show it."""
        out = {"arguments": self.arguments, "violations": [v.as_dict() for v in self.violations]}
        return {**out, "note": self.note} if self.note else out


@dataclass
class Repair:
    """Every attempt (the first decode included) with its arguments and violations."""

    attempts: list[Attempt] = field(default_factory=list)
    arguments: dict[str, Any] | None = None  # normalized, once valid
    questions: list[Question] = field(default_factory=list)  # why it stopped to ask
    last: dict[str, Any] = field(default_factory=dict)  # the arguments it ended with
    usage: RepairUsage = RepairUsage()

    @property
    def repaired(self) -> bool:
        return self.arguments is not None and len(self.attempts) > 1

    def record(self, arguments: Any, violations: tuple[Violation, ...], note: str = "") -> None:
        self.attempts.append(Attempt(arguments, violations, note))

    def spent(self, result: GenerationResult) -> None:
        u = self.usage
        self.usage = RepairUsage(u.attempts + 1, u.prompt_tokens + result.prompt_tokens,
                                 u.completion_tokens + result.completion_tokens)


@dataclass(frozen=True)
class RepairAsk:
    """What one contract call's repair needs besides the call."""

    written: dict[str, Any]  # the schema the model writes to (grounded fields narrowed)
    grounding: Grounding
    wording: Wording  # what questions say, in the user's language
    messages: list[dict[str, Any]]  # the decode's prompt messages, which repair continues
    runtime: dict[str, Any]
    budget: RepairBudget
    charge: Callable[[int], None] | None = None  # each repair decode's tokens, to the key
    today: dt.date | None = None  # the conversation's date (the validators' "today")


class Repairer:
    def __init__(self, engine: Engine, cache: GrammarCache, policy: GrammarPolicy,
                 fmt: ModelFormat, *, compile_timeout_s: float = 10.0) -> None:
        self.engine = engine
        self.cache = cache
        self.policy = policy  # the server's: a repair grammar follows the same policies
        self.format = fmt  # the earlier call is written back in the model's own syntax
        self.compile_timeout_s = compile_timeout_s

    async def run(self, contract: Contract, arguments: dict[str, Any], ask: RepairAsk
                  ) -> Repair:
        report, today = Repair(), ask.today
        outcome = contract.validate(arguments, runtime=ask.runtime, today=today)
        report.record(arguments, outcome.violations)
        deadline = time.monotonic() + ask.budget.seconds
        while not outcome.valid:
            report.questions, repairable = sorted_out(outcome.violations, arguments,
                                                      ask.grounding, ask.wording)
            left = deadline - time.monotonic()
            if report.questions or not repairable or len(report.attempts) > ask.budget.attempts \
                    or left <= 0:
                break
            fixed = await self._attempt(contract, arguments, tuple(repairable), ask, report,
                                        left)
            if fixed is None:
                report.record(arguments, outcome.violations,
                              note="the repair decode ran out of time or tokens")
                continue
            arguments = {**arguments, **fixed}
            outcome = contract.validate(arguments, runtime=ask.runtime, today=today)
            report.record(arguments, outcome.violations)
        report.arguments, report.last = outcome.arguments, arguments
        return report

    async def _attempt(self, contract: Contract, arguments: dict[str, Any],
                       violations: tuple[Violation, ...], ask: RepairAsk, report: Repair,
                       seconds: float) -> dict[str, Any] | None:
        schema = repair_schema(ask.written, violations,
                               keep_null={p[0] for p in ask.grounding.asked},
                               frozen={p[0] for p in ask.grounding.confirmed if len(p) == 1})
        if not schema["properties"]:
            return None  # nothing repair may change
        try:
            spec = self.policy.json_schema_spec(schema, where=f"the repair of {contract.name!r}")
            lookup = await compiled(self.cache, spec,  # (one call's repair: not on disk)
                                    timeout_s=min(seconds, self.compile_timeout_s),
                                    persist=False)
        except (GrammarError, InvalidRequest):
            return None  # recorded as an attempt that could not be made
        # The call as the model wrote it, in its own syntax, then what is wrong with it.
        prompt = ask.messages + self.format.messages([
            Turn("assistant", "", (EarlierCall("call_0", contract.name, arguments),)),
            Turn("user", feedback(contract.name, violations, schema))])
        ids = self.engine.encode(self.engine.render_chat(
            prompt, **self.format.template_kwargs(reasoning=False)))
        decoded = Counted(None)  # a repair cut short is charged what it decoded too
        request = GenerationRequest(ids, SamplingParams(max_tokens=REPAIR_MAX_TOKENS),
                                    lookup.grammar, on_token=decoded)
        try:
            result = await asyncio.wait_for(decode(self.engine, request), timeout=seconds)
        except (TimeoutError, asyncio.CancelledError) as exc:
            if ask.charge is not None:
                ask.charge(len(ids) + decoded.count)
            if isinstance(exc, asyncio.CancelledError):
                raise
            return None
        report.spent(result)
        if ask.charge is not None:
            ask.charge(result.prompt_tokens + result.completion_tokens)
        if not result.grammar_complete:
            return None
        fixed: dict[str, Any] = json.loads(result.text)
        return fixed


def feedback(tool: str, violations: tuple[Violation, ...], schema: dict[str, Any]) -> str:
    fields = ", ".join(schema["properties"])
    lines = "\n".join(v.feedback() for v in violations)
    return (f"The call to {tool} is not valid yet:\n{lines}\n"
            f"Answer only with a JSON object holding corrected values for: {fields}.")


def repair_schema(schema: dict[str, Any], violations: tuple[Violation, ...], *,
                  keep_null: Collection[str] = (), frozen: Collection[str] = ()
                  ) -> dict[str, Any]:
    """An object of just the failing top-level fields, each narrowed by what its violation
    allows; every field is required, since each must be written again. `keep_null`: fields
    that may stay "not given" (grounded, asked); `frozen`: fields repair never writes. A
    violation that names no field asks for nothing to be written again."""
    props = {k: v for k, v in schema.get("properties", {}).items() if k not in frozen}
    failing = [v for v in violations if v.field in props]
    out_props: dict[str, Any] = {}
    for v in failing:
        name = v.field or ""
        out_props[name] = _narrow(copy.deepcopy(props[name]), v,
                                  keep_null=name in keep_null)
    out: dict[str, Any] = {"type": "object", "properties": out_props,
                           "required": list(out_props), "additionalProperties": False}
    if "$defs" in schema:
        out["$defs"] = copy.deepcopy(schema["$defs"])
    return out


def _narrow(node: dict[str, Any], violation: Violation, *, keep_null: bool) -> dict[str, Any]:
    allowed = violation.allowed
    if isinstance(allowed, list) and allowed and all(
            isinstance(a, (str, int, float, bool)) for a in allowed) and not keep_null:
        return {"enum": allowed}  # the only values that can pass: the grammar enforces them
    if violation.grammar is not None:  # the rule's own schema of what passes ("a date on
        # or after today" as a pattern; a format beside it would be followed alone)
        narrowed = {**{k: v for k, v in node.items() if k != "format"}, **violation.grammar}
        return {"anyOf": [narrowed, {"type": "null"}]} if keep_null else narrowed
    return node


def sorted_out(violations: tuple[Violation, ...], arguments: dict[str, Any],
               grounding: Grounding, wording: Wording
               ) -> tuple[list[Question], list[Violation]]:
    """(the questions these violations call for, the violations repair may fix). A value a
    rule needs that nobody gave (null or left out), whether the field is marked or not, is
    a question; a `Confirm` field's violation asks the user to confirm it; a violation that
    names no field is neither: nothing can be written again for it."""
    questions: list[Question] = []
    repairable: list[Violation] = []
    for v in violations:
        if v.field is None:
            continue
        path = path_of(v.pointer)
        if _missing(arguments, v.pointer):
            questions.append(wording.missing(path, at=v.pointer))
        elif path in grounding.confirmed:
            questions.append(wording.confirm(path, v.observed))
        else:
            repairable.append(v)
    seen: dict[str, Question] = {}
    for q in questions:
        seen.setdefault(q.field, q)
    return list(seen.values()), repairable


def _missing(arguments: Any, pointer: str) -> bool:
    """Whether the value at `pointer` is null or not there."""
    node = arguments
    for part in [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]:
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return True
    return node is None


def collected(arguments: dict[str, Any], contract: Contract | None, *,
              leave_out: set[str], today: dt.date | None = None) -> dict[str, Any]:
    """The values given so far, as a valid call would hold them (each field normalized on
    its own), without those asked about or broken."""
    context = {"today": today or clock.today()}
    out: dict[str, Any] = {}
    for name, value in arguments.items():
        if name in leave_out or value is None:
            continue
        if contract is None:
            out[name] = value
            continue
        ok, normal = contract.fields.value((name,), value, context=context)
        if ok:
            out[name] = normal
    return out
