"""A question instead of an invented value. When a call needs what nobody gave (a grounded
or asked field "not given", a cross-field rule that needs it) or a value a person must
confirm broke a rule, the answer is not a call: it asks, by meaning (the field's `Ask`,
else its description; never the bare field name), and says what was collected so far."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from contracts import Contract, Violation
from server.pipeline.grounding import Grounding

Kind = Literal["missing", "confirm"]


@dataclass(frozen=True)
class Question:
    field: str  # the field's JSON Pointer
    question: str
    kind: Kind = "missing"
    value: Any = None  # what to confirm


@dataclass(frozen=True)
class NeedsInput:
    tool: str
    questions: tuple[Question, ...]
    collected: dict[str, Any] = field(default_factory=dict)  # the valid values so far

    def text(self) -> str:
        return "\n".join(q.question for q in self.questions)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "tool": self.tool,
            "missing": [{"field": q.field, "question": q.question}
                        for q in self.questions if q.kind == "missing"],
            "collected": self.collected}
        confirm = [{"field": q.field, "value": q.value, "question": q.question}
                   for q in self.questions if q.kind == "confirm"]
        if confirm:
            out["confirm"] = confirm
        return out


def sorted_out(violations: tuple[Violation, ...], arguments: dict[str, Any],
               grounding: Grounding) -> tuple[list[Question], list[Violation]]:
    """(the questions these violations call for, the violations repair may fix)."""
    questions: list[Question] = []
    repairable: list[Violation] = []
    for v in violations:
        name = v.field
        if name is not None and name in grounding.asked and arguments.get(name) is None:
            questions.append(missing(name, grounding))
        elif name is not None and name in grounding.confirmed:
            questions.append(confirm(name, arguments.get(name), grounding))
        else:
            repairable.append(v)
    return _unique(questions), repairable


def missing(name: str, grounding: Grounding) -> Question:
    asked = grounding.questions.get(name)
    if asked is None:
        asked = f"Could you tell me the {_about(name, grounding)}?"
    return Question(f"/{name}", asked)


def confirm(name: str, value: Any, grounding: Grounding) -> Question:
    return Question(f"/{name}", f"Please confirm the {_about(name, grounding)}: {value} - is "
                                "that right, or what should it be?", "confirm", value)


def changed(name: str, old: Any, new: Any, grounding: Grounding) -> Question:
    """A filled value the user changed, on a tool whose call cannot be undone: both values,
    and the user decides (server/pipeline/slotting.py reads the answer)."""
    about = _about(name, grounding)
    return Question(f"/{name}", f"Earlier the {about} was {old}; now you said {new}. Should "
                                f"I use {new} instead of {old}? Please answer yes or no.",
                    "confirm", new)


def collected(arguments: dict[str, Any], contract: Contract | None, *,
              leave_out: set[str], context: dict[str, Any]) -> dict[str, Any]:
    """The values given so far, as a valid call would hold them (each field normalized on
    its own), without those asked about or broken."""
    out: dict[str, Any] = {}
    for name, value in arguments.items():
        if name in leave_out or value is None:
            continue
        if contract is None:
            out[name] = value
            continue
        ok, normal = contract.fields.normalized(name, value, context=context)
        if ok:
            out[name] = normal
    return out


def _about(name: str, grounding: Grounding) -> str:
    """What the field is, in words: its description up to a clause or an example (the
    field's name, spelled as words, where it has none)."""
    description = grounding.descriptions.get(name)
    if not description:
        return name.replace("_", " ").strip()
    first = re.split(r"[;(:]| e\.g\.", description, maxsplit=1)[0].strip().rstrip(".,")
    return first[:1].lower() + first[1:] if first else name.replace("_", " ")


def _unique(questions: list[Question]) -> list[Question]:
    seen: dict[str, Question] = {}
    for q in questions:
        seen.setdefault(q.field, q)
    return list(seen.values())
