"""The date ranges a repair's grammar writes (contracts/date_ranges.py), checked day by day
against the calendar, with hypothesis choosing the ends."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts.date_ranges import between, on_or_after, on_or_before


def _wanted(day: dt.date, first: dt.date, last: dt.date) -> bool:
    return first <= day <= last and not (day.month == 2 and day.day == 29)


@settings(max_examples=40, deadline=None)
@given(st.dates(dt.date(1990, 1, 1), dt.date(2090, 12, 31)),
       st.integers(min_value=0, max_value=900))
def test_a_range_holds_exactly_its_days(first, length):
    last = first + dt.timedelta(days=length)
    pattern = re.compile(between(first, last))
    day = first - dt.timedelta(days=40)
    while day <= last + dt.timedelta(days=40):
        assert bool(pattern.match(day.isoformat())) == _wanted(day, first, last), day
        day += dt.timedelta(days=1)


def test_open_ends_reach_a_century_and_refuse_the_other_side():
    today = dt.date(2026, 12, 7)
    after, before = re.compile(on_or_after(today)), re.compile(on_or_before(today))
    assert after.match("2026-12-07") and after.match("2126-12-31")
    assert not after.match("2026-12-06") and not after.match("2027-02-30")
    assert before.match("2026-12-07") and before.match("1926-01-01")
    assert not before.match("2026-12-08") and not before.match("2026-13-01")
    with pytest.raises(ValueError, match="empty range"):
        between(today, today - dt.timedelta(days=1))
