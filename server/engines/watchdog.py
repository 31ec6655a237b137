"""A watchdog for an engine's worker thread: times each step (a prefill, a decode step) from
a monitor thread of its own, and says when one runs past its limit.

A thread cannot be killed, so a hung step cannot be stopped. What can be done is done by
the owner's callbacks: `on_hang` fails the requests the step holds (their clients get a 503
at once instead of waiting out their time limit) and refuses new work; the step's results,
if it ever returns, are discarded for those requests; `on_recover` runs when it returns."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator

log = logging.getLogger("strictcall.engine")


class StepWatchdog:
    def __init__(self, timeout_s: float, *, on_hang: Callable[[float, bool], None],
                 on_recover: Callable[[float], None], name: str = "engine-watchdog",
                 clock: Callable[[], float] = time.monotonic) -> None:
        """`on_hang(elapsed_s, first)` runs on the monitor thread on every check while a
        step is over its limit (`first`: the first time for this step); `on_recover(s)` on
        the worker thread when the hung step returns, after `s` seconds."""
        self.timeout_s = timeout_s
        self._on_hang = on_hang
        self._on_recover = on_recover
        self._clock = clock
        self._lock = threading.Lock()
        self._started: float | None = None
        self._hung = False
        self.hangs = 0
        self._stop = threading.Event()
        # Checked often enough that a hang is caught within a quarter of its limit.
        self._tick_s = min(1.0, timeout_s / 4)
        self._thread = threading.Thread(target=self._watch, name=name, daemon=True)
        self._thread.start()

    @property
    def hung_for(self) -> float | None:
        """Seconds the current step has run, if it is past its limit; else None."""
        with self._lock:
            if not self._hung or self._started is None:
                return None
            return self._clock() - self._started

    @contextlib.contextmanager
    def step(self) -> Iterator[None]:
        """Around one step on the worker thread."""
        with self._lock:
            self._started = self._clock()
        try:
            yield
        finally:
            with self._lock:
                started = self._started if self._started is not None else self._clock()
                hung, took = self._hung, self._clock() - started
                self._started, self._hung = None, False
            if hung:
                self._on_recover(took)

    def check(self) -> None:
        """One check (the monitor's loop calls it; tests may too). Under the lock, so a
        step cannot end between "it is hung" and its requests being failed."""
        with self._lock:
            if self._started is None:
                return
            elapsed = self._clock() - self._started
            if elapsed <= self.timeout_s:
                return
            first = not self._hung
            if first:
                self._hung = True
                self.hangs += 1
            try:
                self._on_hang(elapsed, first)
            except Exception:
                log.exception("the watchdog's hang handler failed")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _watch(self) -> None:
        while not self._stop.wait(self._tick_s):
            self.check()
