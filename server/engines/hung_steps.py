"""What the decode loop (engines/loop.py) does when its watchdog (engines/watchdog.py) finds a
step hung: the requests that step holds, and any that arrive behind it, fail with a 503 at
once; the engine is reported unhealthy until the step returns, and whatever it then returns
for them is discarded. Called on the watchdog's monitor thread, and on the worker's when
the hung step returns."""

from __future__ import annotations

import contextlib
import logging
import queue

from server.engines.decoding import DecodeRow, settle
from server.engines.watchdog import StepWatchdog
from server.errors import EngineFailure

log = logging.getLogger("strictcall.engine")


class HungSteps:
    """The loop's hooks for its watchdog, over the loop's own state (set in its `_start`)."""

    _counts: dict[str, int]
    _inbox: queue.Queue[DecodeRow | None]
    _inflight: list[DecodeRow]  # what the step now running holds
    _rows: list[DecodeRow]
    _prefilling: list[DecodeRow]
    _waiting: list[DecodeRow]
    _watchdog: StepWatchdog

    def _on_hang(self, elapsed: float, first: bool) -> None:
        failure = EngineFailure(
            f"an engine step ran past the {self._watchdog.timeout_s:g} s watchdog; the "
            "request was failed and the engine is reported unhealthy until the step "
            "returns; retry (another replica can answer)")
        if first:
            self._counts["hung_steps"] += 1
            log.error("an engine step has run %.1f s (watchdog: %g s): failing its %d "
                      "request(s); /health reports degraded until it returns", elapsed,
                      self._watchdog.timeout_s, len(self._inflight))
            for row in self._inflight:
                self._fail_watched(row, failure)
        # New work would wait behind the hung step: failed too (admission refuses more).
        closing = False
        while True:
            try:
                seq = self._inbox.get_nowait()
            except queue.Empty:
                break
            if seq is None:
                closing = True
            else:
                self._fail_watched(seq, failure)
        if closing:
            self._inbox.put(None)

    def _fail_watched(self, seq: DecodeRow, failure: EngineFailure) -> None:
        if not seq.future.done():
            self._counts["failed_by_watchdog"] += 1
        settle(seq.future, exc=failure)

    def _on_recover(self, took: float) -> None:
        log.warning("the hung engine step returned after %.1f s; its requests had been "
                    "failed, their results are discarded; serving again", took)

    def _watched(self) -> contextlib.AbstractContextManager[None]:
        # Everything the worker holds waits on the step, running or not.
        self._inflight = [*self._rows, *self._prefilling, *self._waiting]
        return self._watchdog.step()
