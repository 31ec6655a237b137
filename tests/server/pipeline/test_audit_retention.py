"""Audit log retention (`--audit-log-max-age-s`): the rotated files FILE.1 ... FILE.N last
written longer ago than the max age are deleted, younger ones kept; the live file is never
deleted, whatever its age, nor any file that is not one of the log's numbered rotations.
The sweeper does it on each round, and not at all when no max age is set.

The files' ages are their mtimes, set days apart from now: no test waits."""

from __future__ import annotations

import asyncio
import json
import os
import time

import pytest

from server.background import sweep_forever
from server.errors import StateUnavailable
from server.logs import AuditLog
from server.state import MemoryStateStore
from server.state.timed import TimedStateStore

DAY_S = 86400.0
MAX_AGE_S = 90 * DAY_S


def age(path, days: float) -> None:
    """Make `path` last written `days` ago."""
    when = time.time() - days * DAY_S
    os.utime(path, (when, when))


@pytest.fixture()
def audit(tmp_path):
    """An audit log that has rotated into FILE.1 ... FILE.4 (FILE.1 the newest)."""
    log = AuditLog(tmp_path / "audit.jsonl", max_bytes=1024, backups=4)
    for i in range(60):
        log.write({"n": i, "pad": "x" * 100})
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "audit.jsonl", "audit.jsonl.1", "audit.jsonl.2", "audit.jsonl.3", "audit.jsonl.4"]
    yield log
    log.close()


def names(directory) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_rotated_files_older_than_the_max_age_go_and_younger_ones_stay(audit, tmp_path):
    for suffix, days in ((1, 1), (2, 89), (3, 91), (4, 400)):
        age(tmp_path / f"audit.jsonl.{suffix}", days)
    gone = audit.prune(max_age_s=MAX_AGE_S)
    assert sorted(p.name for p in gone) == ["audit.jsonl.3", "audit.jsonl.4"]
    assert names(tmp_path) == ["audit.jsonl", "audit.jsonl.1", "audit.jsonl.2"]
    assert audit.prune(max_age_s=MAX_AGE_S) == []  # nothing left past its age


def test_the_live_file_is_never_pruned_and_is_still_written_after(audit, tmp_path):
    live = tmp_path / "audit.jsonl"
    age(live, 1000)
    for suffix in range(1, 5):
        age(tmp_path / f"audit.jsonl.{suffix}", 1000)
    assert len(audit.prune(max_age_s=MAX_AGE_S)) == 4
    assert names(tmp_path) == ["audit.jsonl"]
    audit.write({"n": "after"})
    assert json.loads(live.read_text().splitlines()[-1]) == {"n": "after"}


def test_only_the_logs_own_numbered_rotations_are_pruned(audit, tmp_path):
    """A compressed or copied rotation, another log's rotations and a file whose name only
    starts like the log's are not the log's to delete, however old."""
    others = ["audit.jsonl.1.gz", "audit.jsonl.bak", "audit.jsonl2.1", "other.jsonl.1",
              "audit.jsonl.old.3"]
    for name in others:
        (tmp_path / name).write_text("kept\n")
        age(tmp_path / name, 1000)
    age(tmp_path / "audit.jsonl.4", 1000)
    assert [p.name for p in audit.prune(max_age_s=MAX_AGE_S)] == ["audit.jsonl.4"]
    assert set(others) <= set(names(tmp_path))


class Enough(Exception):
    """Ends the sweeper's loop: it lets any error but the state store's through."""


class CountedSweeps(MemoryStateStore):
    """A memory state store whose sweep ends the sweeper after `rounds` rounds."""

    def __init__(self, rounds: int) -> None:
        super().__init__()
        self.rounds, self.sweeps = rounds, 0

    def sweep(self, *, limit: int) -> int:
        self.sweeps += 1
        if self.sweeps > self.rounds:  # every round before has pruned, if it prunes
            raise Enough
        return super().sweep(limit=limit)


def sweep_rounds(audit: AuditLog, max_age_s: float | None, rounds: int) -> None:
    """Run the sweeper (no pause between rounds) for `rounds` whole rounds."""
    state = TimedStateStore(CountedSweeps(rounds), workers=1, timeout_s=5, shown="memory")
    try:
        with pytest.raises(Enough):
            asyncio.run(asyncio.wait_for(sweep_forever(
                state, every_s=0, audit=audit, audit_max_age_s=max_age_s), timeout=30))
    finally:
        state.close()


def test_the_sweeper_prunes_rotated_files_past_the_max_age(audit, tmp_path):
    age(tmp_path / "audit.jsonl.2", 1)
    age(tmp_path / "audit.jsonl.3", 100)
    age(tmp_path / "audit.jsonl.4", 100)
    sweep_rounds(audit, MAX_AGE_S, rounds=2)
    assert names(tmp_path) == ["audit.jsonl", "audit.jsonl.1", "audit.jsonl.2"]


def test_without_a_max_age_the_sweeper_keeps_every_rotated_file(audit, tmp_path):
    for suffix in range(1, 5):
        age(tmp_path / f"audit.jsonl.{suffix}", 1000)
    sweep_rounds(audit, None, rounds=3)
    assert len(names(tmp_path)) == 5


class DownStore(CountedSweeps):
    """A state store that is down for its first `down` sweeps."""

    def __init__(self, rounds: int, down: int) -> None:
        super().__init__(rounds)
        self.down = down

    def sweep(self, *, limit: int) -> int:
        if self.sweeps < self.down:
            self.sweeps += 1
            raise StateUnavailable("the database did not answer")
        return super().sweep(limit=limit)


def test_the_sweeper_prunes_the_audit_files_while_the_state_store_is_down(audit, tmp_path):
    """The audit files are the replica's own: a database outage does not keep them past
    their age."""
    age(tmp_path / "audit.jsonl.3", 100)
    state = TimedStateStore(DownStore(rounds=1, down=1), workers=1, timeout_s=5,
                            shown="memory")
    try:
        with pytest.raises(Enough):
            asyncio.run(asyncio.wait_for(sweep_forever(
                state, every_s=0, audit=audit, audit_max_age_s=MAX_AGE_S), timeout=30))
    finally:
        state.close()
    # (The second round's sweep ends the loop before it prunes: the first one pruned.)
    assert "audit.jsonl.3" not in names(tmp_path)
