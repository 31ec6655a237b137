"""The date contracts and the server take as today: the host's local date, or the one
`STRICTCALL_TODAY` (an ISO date) fixes.

Fixing it makes a run reproducible: replaying recorded dialogues that say "yesterday", or a
test suite whose expected values and whose server must agree on the day even when the run
crosses midnight. Read on every call, so a process started with it keeps it.
"""

from __future__ import annotations

import datetime as dt
import functools
import os

ENV = "STRICTCALL_TODAY"


def today() -> dt.date:
    """`STRICTCALL_TODAY`'s date where it is set, else the local date."""
    fixed = os.environ.get(ENV, "").strip()
    return _parse(fixed) if fixed else dt.date.today()


def check() -> None:
    """Raise ValueError, in one line that says what to write, where `STRICTCALL_TODAY` is
    set but is not a date (`strictcall serve` checks it before it starts)."""
    fixed = os.environ.get(ENV, "").strip()
    if fixed:
        _parse(fixed)


@functools.lru_cache(maxsize=8)
def _parse(value: str) -> dt.date:
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{ENV}={value!r} is not a date: write it as YYYY-MM-DD, or unset "
                         "it to use the host's date") from None
