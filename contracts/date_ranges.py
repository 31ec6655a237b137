"""ISO dates within a range as one regular expression: what a repair's grammar writes for a
date a rule bounds ("a check-in on or after today"), which JSON Schema cannot say beside
`format: date`. Built from the calendar by enumeration (whole years, then the months and
days of the first and last), so it is plainly right; February stops at the 28th (a 29th
is left to the validator: one day of a leap year the repair cannot write)."""

from __future__ import annotations

import datetime as dt

YEARS = 100  # how far an open end reaches: "on or after today" means within this many years

_DAYS = {1: 31, 2: 28, 3: 31, 4: 30, 5: 31, 6: 30, 7: 31, 8: 31, 9: 30, 10: 31, 11: 30,
         12: 31}


def on_or_after(day: dt.date) -> str:
    return between(day, dt.date(min(day.year + YEARS, 9999), 12, 31))


def on_or_before(day: dt.date) -> str:
    return between(dt.date(max(day.year - YEARS, 1), 1, 1), day)


def between(first: dt.date, last: dt.date) -> str:
    """A regular expression (anchored) of the ISO dates from `first` to `last`, both in."""
    if last < first:
        raise ValueError(f"an empty range: {first} to {last}")
    parts: list[str] = []
    if first.year == last.year:
        parts += _months(first.year, first.month, first.day, last.month, last.day)
    else:
        parts += _months(first.year, first.month, first.day, 12, 31)
        whole = [f"{y:04d}" for y in range(first.year + 1, last.year)]
        if whole:
            parts.append(f"(?:{'|'.join(whole)})-{_any_day()}")
        parts += _months(last.year, 1, 1, last.month, last.day)
    return "^(?:" + "|".join(parts) + ")$"


def _months(year: int, month: int, day: int, last_month: int, last_day: int) -> list[str]:
    """`year`'s dates from `month`-`day` to `last_month`-`last_day`."""
    out = []
    for m in range(month, last_month + 1):
        low = day if m == month else 1
        high = min(last_day if m == last_month else _DAYS[m], _DAYS[m])
        if low <= high:
            out.append(f"{year:04d}-{m:02d}-{_alternatives(low, high)}")
    return out


def _any_day() -> str:
    return "(?:" + "|".join(f"{m:02d}-{_alternatives(1, _DAYS[m])}" for m in _DAYS) + ")"


def _alternatives(low: int, high: int) -> str:
    return "(?:" + "|".join(f"{d:02d}" for d in range(low, high + 1)) + ")"
