"""The work a server does beside its requests, started and stopped with it: applying
journaled outcomes the state store did not take in time, sweeping what expired out of
the state store and the audit log's rotated files, and reading the API keys again when
their file changes or on SIGHUP."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Callable, Coroutine
from typing import Any

from server.errors import StateUnavailable
from server.execution.keyed import KeyedRuns
from server.identity import WatchedKeyRing
from server.logs import AuditLog
from server.state.timed import TimedStateStore

log = logging.getLogger("strictcall.state")
SWEEP_BATCH = 1000  # records deleted per statement: a sweep never holds locks long


RESTART_S = 1.0  # the first wait before a failed task runs again; doubled each time
RESTART_MAX_S = 60.0
HEALTHY_AFTER_S = 300.0  # a task that has run this long since its failure is well again

Work = Callable[[], Coroutine[Any, Any, Any]]


class Background:
    """The server's background tasks, each supervised: after any exception it is logged and
    the task runs again (after 1 s, doubling to a minute), and `/health` names it as
    failing until it has run `HEALTHY_AFTER_S` without failing again. A task that dies
    silently would leave outcomes unreplayed and records unswept until a restart."""

    def __init__(self) -> None:
        self._tasks: list[asyncio.Task[Any]] = []
        self._failed: dict[str, tuple[float, str]] = {}  # name -> (when, what)

    def start(self, work: Work, name: str) -> None:
        """Run `work()` (a fresh coroutine each run) under supervision."""
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._supervised(work, name), name=name))

    def failing(self) -> dict[str, str]:
        """The tasks that failed lately, with what they failed with."""
        now = time.monotonic()
        return {name: what for name, (when, what) in self._failed.items()
                if now - when < HEALTHY_AFTER_S}

    async def _supervised(self, work: Work, name: str) -> None:
        delay = RESTART_S
        while True:
            started = time.monotonic()
            try:
                await work()
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if time.monotonic() - started > HEALTHY_AFTER_S:
                    delay = RESTART_S
                self._failed[name] = (time.monotonic(), f"{type(exc).__name__}: {exc}"[:300])
                log.error("background task %s failed; running it again in %g s", name,
                          delay, exc_info=exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, RESTART_MAX_S)

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
    rotated audit files past their age (the audit files are local: pruned while the state
    store is down too)."""
    while True:
        await asyncio.sleep(every_s)
        try:
            swept = await sweep(state)
        except StateUnavailable as exc:
            log.warning("sweep skipped: %s", exc.detail)
        else:
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
