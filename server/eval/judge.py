"""The judge of a dialogue's answers, field by field, against values the dialogue's author
wrote by hand (`gold`), never anything the server under test computes: shared by
`strictcall eval` dialogues (server/eval/dialogues.py) and `strictcall-bench grounding`.

The measures: correct; asked although given (`asked_given`); asked while nothing was given
(`asked_missing`, right); invented (a value where nobody gave one); wrong (another value
than the one given); changed (a value that moved while the user changed nothing); left out
(a given value the answer does not show: an optional field written null); not shown
(nothing given, nothing shown); confirming (a confirmation question about a value the user
just changed)."""

from __future__ import annotations

import contextlib
import datetime as dt
import re
from typing import Any

from contracts import clock
from server.eval.runner import same

GOLD_MEASURES = ("correct", "asked_given", "asked_missing", "invented", "wrong", "changed",
                 "left_out", "not_shown", "confirming")



def judge_fields(gold: dict[str, Any], shown: dict[str, Any], *, asked: set[str],
                 confirming: set[str], before_gold: dict[str, Any],
                 before_shown: dict[str, Any]) -> dict[str, str]:
    """Each gold field's measure: what an answer shows (`shown`: a call's arguments or a
    question's collected values; `asked`/`confirming`: the fields it asks about) against
    the values the user has given (`gold`, hand-written), the turn before in `before_*`."""
    out = {}
    for name, want in gold.items():
        got = shown.get(name)
        if name in confirming:
            out[name] = "confirming" if not same(before_gold.get(name), want) \
                else "asked_given"
        elif name in asked:
            out[name] = "asked_missing" if want is None else "asked_given"
        elif got is None:
            out[name] = "not_shown" if want is None else "left_out"
        elif want is not None and same(got, want):
            out[name] = "correct"
        elif want is None:
            out[name] = "invented"
        elif name in before_gold and same(before_gold[name], want) \
                and same(before_shown.get(name), want):
            out[name] = "changed"
        else:
            out[name] = "wrong"
    return out


def dated(value: Any) -> Any:
    """The run's dates in an expected value: {today}, {yesterday}, {ago:N} (N days ago),
    {date:DD.MM} (the latest such day that is not in the future), {next:DD.MM} (the next
    one that is not past), {day:N} (the latest N-th of a month that is not in the future:
    «3-го числа»)."""
    if not isinstance(value, str) or "{" not in value:
        return value
    today = clock.today()

    def day(match: re.Match[str]) -> str:
        kind, arg = match.group(1), match.group(2)
        if kind == "today":
            return today.isoformat()
        if kind == "yesterday":
            return (today - dt.timedelta(days=1)).isoformat()
        if kind == "ago":
            return (today - dt.timedelta(days=int(arg))).isoformat()
        if kind == "day":
            month = today.replace(day=1)
            while True:
                with contextlib.suppress(ValueError):  # (no 31st in this month)
                    if (found := month.replace(day=int(arg))) <= today:
                        return found.isoformat()
                month = (month - dt.timedelta(days=1)).replace(day=1)
        d, m = (int(x) for x in arg.split("."))
        this_year = dt.date(today.year, m, d)
        if kind == "next":
            return (this_year if this_year >= today else dt.date(today.year + 1, m, d)
                    ).isoformat()
        return (this_year if this_year <= today else dt.date(today.year - 1, m, d)).isoformat()
    return re.sub(r"\{(today|yesterday|ago|date|next|day)(?::([0-9.]+))?\}", day, value)


def asked_fields(extension: dict[str, Any]) -> tuple[set[str], set[str]]:
    """(the fields an answer asks for, the fields it asks to confirm), by name, from its
    `strictcall` extension."""
    needs = extension.get("needs_input") or {}
    missing = {m["field"].lstrip("/") for m in needs.get("missing") or ()}
    missing |= {f.lstrip("/") for c in needs.get("choose") or () for f in c.get("fields", ())}
    confirm = {c["field"].lstrip("/") for c in needs.get("confirm") or ()}
    return missing, confirm
