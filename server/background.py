"""The work a server does beside its requests, started and stopped with it: applying
journaled outcomes the state store did not take in time, sweeping what expired out of
the state store and the audit log's rotated files, and reading the API keys again when
their file changes or on SIGHUP."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Coroutine
from typing import Any

from server.errors import StateUnavailable
from server.execution.keyed import KeyedRuns
from server.identity import WatchedKeyRing
from server.logs import AuditLog
from server.state.timed import TimedStateStore

log = logging.getLogger("strictcall.state")
SWEEP_BATCH = 1000  # records deleted per statement: a sweep never holds locks long


class Background:
    def __init__(self) -> None:
        self._tasks: list[asyncio.Task[Any]] = []

    def start(self, work: Coroutine[Any, Any, Any], name: str) -> None:
        self._tasks.append(asyncio.get_running_loop().create_task(work, name=name))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def replay_journal(runs: KeyedRuns) -> None:
    """Once at start (what a previous run of this replica journaled), then forever."""
    applied = await runs.replay()
    if applied:
        log.info("applied %d journaled outcome(s) from before the restart", applied)
    await runs.replay_forever()


async def sweep_forever(state: TimedStateStore, *, every_s: float, audit: AuditLog | None,
                        audit_max_age_s: float | None) -> None:
    """Delete expired records (every replica sweeps; deleting twice is harmless) and
    rotated audit files past their age."""
    while True:
        await asyncio.sleep(every_s)
        try:
            swept = await sweep(state)
        except StateUnavailable as exc:
            log.warning("sweep skipped: %s", exc.detail)
            continue
        if swept:
            log.info("swept %d expired state record(s)", swept)
        if audit is not None and audit_max_age_s is not None:
            await asyncio.to_thread(audit.prune, max_age_s=audit_max_age_s)


async def sweep(state: TimedStateStore) -> int:
    total = 0
    while True:
        gone = await state.run(state.inner.sweep, limit=SWEEP_BATCH)
        total += gone
        if gone < SWEEP_BATCH:
            return total


def reload_on_hangup(keys: WatchedKeyRing) -> None:
    """SIGHUP reloads the keys (where the loop may take signals: the main thread)."""
    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGHUP, keys.reload)
    except (RuntimeError, ValueError, NotImplementedError):
        log.debug("SIGHUP not watched here (not the main thread): the file is still watched")
