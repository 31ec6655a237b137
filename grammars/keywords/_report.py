"""The enforcement report: every keyword occurrence, with its JSON Pointer, in one tier."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

Tier = Literal["grammar", "validator", "annotation", "rejected"]
TIERS: tuple[Tier, ...] = ("grammar", "validator", "annotation", "rejected")

# What a keyword family decides for one occurrence: a tier and a note, or several when the
# mask enforces part of a keyword and the validator the rest.
Verdicts = list[tuple[Tier, str]]


class KeywordUse(NamedTuple):
    """One keyword occurrence: a named tuple, built in a third of a frozen dataclass's time
    (a large schema has tens of thousands; every request's tools are prefixed anew)."""

    pointer: str
    keyword: str
    tier: Tier
    note: str = ""
    # Reports a keyword's absence (an object without additionalProperties under strict
    # objects), not an occurrence.
    implicit: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pointer": self.pointer, "keyword": self.keyword,
                               "tier": self.tier}
        if self.note:
            out["note"] = self.note
        if self.implicit:
            out["implicit"] = True
        return out


@dataclass(frozen=True)
class EnforcementReport:
    backend: str
    uses: tuple[KeywordUse, ...] = field(default_factory=tuple)

    def counts(self) -> dict[str, int]:
        found = Counter(u.tier for u in self.uses)
        return {tier: found.get(tier, 0) for tier in TIERS}

    def of(self, tier: Tier) -> list[KeywordUse]:
        return [u for u in self.uses if u.tier == tier]

    def to_json(self) -> dict[str, Any]:
        return {"backend": self.backend, "counts": self.counts(),
                "keywords": [u.to_json() for u in self.uses]}

    def prefixed(self, prefix: str) -> EnforcementReport:
        return EnforcementReport(self.backend, tuple(
            KeywordUse(prefix + u.pointer, u.keyword, u.tier, u.note, u.implicit)
            for u in self.uses))  # (a third of `_replace`'s time: every request's tools)

    @staticmethod
    def merge(backend: str, reports: list[EnforcementReport]) -> EnforcementReport:
        return EnforcementReport(backend, tuple(u for r in reports for u in r.uses))

    def summary(self, *, listed: int = 4) -> str:
        """One header line: counts per tier, then where the validator-only keywords are."""
        counts = self.counts()
        text = ", ".join(f"{t}={counts[t]}" for t in TIERS if t != "rejected")
        late = self.of("validator")
        if late:
            shown = " ".join(f"{u.keyword}@{u.pointer or '/'}" for u in late[:listed])
            more = f" +{len(late) - listed}" if len(late) > listed else ""
            text += f"; validator: {shown}{more}"
        grounded = [u for u in self.uses if u.keyword == "x-strictcall-grounded"
                    and u.tier == "grammar"]
        if grounded:  # each with how many values the conversation gave it
            text += "; grounded: " + " ".join(
                f"{u.pointer.replace('/properties/', '/')}={u.note.split()[0]}"
                for u in grounded)
        return text


@dataclass(frozen=True)
class Analysis:
    """A schema's report, and the schema the backend compiles (validator-tier keywords out)."""

    report: EnforcementReport
    grammar_schema: dict[str, Any]
    # The grammar schema's canonical JSON (grammars/specs.py), where a remembered check
    # kept it: a spec is keyed by that text, which then need not be written again.
    grammar_json: str = ""
