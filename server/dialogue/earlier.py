"""What the conversation's earlier calls took from the user: each string value an earlier
call wrote, under its key, and the user turns whose words hold it. Grounding reads it for
two rules (server/dialogue/grounding.py):

- an earlier exchange's answer stays its field's (`spent_elsewhere`): a value the user
  gave that a call before their newest message used for a field of another name ("name it
  academic_hub" made the folder) is no candidate of a later call's field, unless the user
  says it again;
- one saying, one field (`said`): how many times the user's words say a value, less the
  sayings an earlier exchange's call already used.

Bounded: a request's earlier calls may hold hundreds of thousands of values (its whole
body of arguments); only the newest `MAX_VALUES`, each of at most `MAX_VALUE_CHARS`, are
kept, and each is looked up in the user's words once per request."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from server.dialogue.evidence import Evidence
from server.dialogue.marks import Path
from server.dialogue.plain import MAX_VALUE_CHARS

MAX_VALUES = 512  # an earlier call's string values kept, newest first

Used = tuple[int, str, str]  # an earlier call's string value: (its turn, its key, value)


@dataclass(frozen=True)
class EarlierValues:
    used: tuple[Used, ...] = ()
    said_in: dict[str, tuple[int, ...]] = field(default_factory=dict)  # user turns
    newest: int = -1  # the user's newest message's turn

    @classmethod
    def of(cls, calls: Sequence[tuple[int, Any]], evidence: Evidence) -> EarlierValues:
        """`calls`: each earlier call's turn and JSON arguments, in the conversation's
        order."""
        used = _newest(calls)
        users = [p for p in evidence.pieces if p.source == "user"]
        said_in = {v: tuple(dict.fromkeys(p.turn for p in users if v in p.text))
                   for v in dict.fromkeys(v for _, _, v in used)}
        return cls(used, said_in, max((p.turn for p in users), default=-1))

    def spent_elsewhere(self, path: Path) -> set[str]:
        """The user's values an earlier exchange's call used for a field of another name,
        never for one of this field's, and not said again since. (Only calls before the
        user's newest message: in an agent loop's own turn, "make the folder 'temp' and
        move the file there" gives 'temp' to both calls.)"""
        key = next((k for k in reversed(path) if k != "*"), path[-1])
        same = {v for _, k, v in self.used if k == key}
        last: dict[str, int] = {}
        for turn, k, v in self.used:
            if k != key and v not in same and turn < self.newest:
                last[v] = max(last.get(v, -1), turn)
        return {v for v, turn in last.items()
                if any(t < turn for t in self.said_in[v])
                and not any(t > turn for t in self.said_in[v])}

    def said(self, values: Iterable[str], evidence: Evidence) -> dict[str, int]:
        """How many times the user's words say each of `values` (a turn's number-words
        copy of its text counted once), less the sayings an earlier exchange's call
        already used ("open the academic_venture folder" was the cd's; "within
        academic_venture" is this request's once)."""
        out: dict[str, int] = {}
        for value in values:
            spent = max((t for t, _, v in self.used if v == value and t < self.newest),
                        default=-1)
            per_turn: dict[int, int] = {}
            for p in evidence.pieces:
                if p.source == "user" and p.turn > spent:
                    per_turn[p.turn] = max(per_turn.get(p.turn, 0), p.text.count(value))
            if sum(per_turn.values()):
                out[value] = sum(per_turn.values())
        return out


def _newest(calls: Sequence[tuple[int, Any]]) -> tuple[Used, ...]:
    """The string values of the calls' arguments, newest call first, each under its own
    key at any depth (an array's items under the array's key): at most `MAX_VALUES`, none
    longer than `MAX_VALUE_CHARS` (no plain string's candidate is)."""
    out: list[Used] = []
    for turn, arguments in reversed(calls):
        stack: list[tuple[str, Any]] = [("", arguments)]
        while stack and len(out) < MAX_VALUES:
            key, value = stack.pop()
            if isinstance(value, str):
                if key and len(value) <= MAX_VALUE_CHARS:
                    out.append((turn, key, value))
            elif isinstance(value, dict):
                stack += [(str(k), v) for k, v in reversed(list(value.items()))]
            elif isinstance(value, list):
                stack += [(key, v) for v in reversed(value)]
        if len(out) >= MAX_VALUES:
            break
    return tuple(out)
