"""`TimedStateStore`: every state operation on threads of its own, each with a deadline, so a
slow or paused database never stalls anything else.

The threads are a bounded pool of the state store's own: not the event loop's default pool,
which plans chat requests, and not the tool handlers' pools. A caller waits at most
`timeout_s` for its operation (queued and run); past it, or when the store fails, it gets a
`StateUnavailable` (503 with Retry-After) and the operation, if it has not started, never
does. An operation already running on a database that stopped answering holds its thread
until the database answers or its socket times out: those threads count against the bound,
and once `workers` of them are busy and as many are queued behind them, a new operation is
refused at once rather than queued without end.

Operations a thread of this pool makes itself (a compare-and-set loop over `get` and
`put`) run on that thread, inline: the pool never waits on itself."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from server.errors import StateUnavailable
from server.state.records import JsonObject, Record, StateError, StateStore, StoreFull

T = TypeVar("T")
log = logging.getLogger("strictcall.state")
_ON_POOL = threading.local()
QUEUE_FACTOR = 4  # operations waiting for a thread, per thread, before new ones are refused


class TimedStateStore(StateStore):
    def __init__(self, inner: StateStore, *, workers: int, timeout_s: float,
                 shown: str) -> None:
        self.inner = inner
        self.timeout_s = timeout_s
        self.shown = shown  # the store's URL without its password, for messages
        self.workers = workers
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix="strictcall-state",
            initializer=_mark_pool_thread)
        self._lock = threading.Lock()
        self._inside = 0  # queued or running
        self.counts = {"timed_out": 0, "failed": 0, "refused_busy": 0}

    # -- the StateStore interface, for callers on other threads --------------------------
    def get(self, namespace: str, key: str) -> Record | None:
        return self.call(self.inner.get, namespace, key)

    def create(self, namespace: str, key: str, value: JsonObject, *,
               ttl_s: float | None = None) -> Record | None:
        return self.call(self.inner.create, namespace, key, value, ttl_s=ttl_s)

    def put(self, namespace: str, key: str, value: JsonObject, *, version: int | None = None,
            ttl_s: float | None = None) -> Record:
        return self.call(self.inner.put, namespace, key, value, version=version, ttl_s=ttl_s)

    def delete(self, namespace: str, key: str, *, version: int | None = None) -> bool:
        return self.call(self.inner.delete, namespace, key, version=version)

    def sweep(self, *, limit: int) -> int:
        return self.call(self.inner.sweep, limit=limit)

    def get_many(self, namespace: str, keys: list[str]) -> list[Record | None]:
        return self.call(self.inner.get_many, namespace, keys)

    def touch(self, namespace: str, keys: list[str], *, ttl_s: float) -> None:
        self.call(self.inner.touch, namespace, keys, ttl_s=ttl_s)

    def now(self) -> float:
        return self.call(self.inner.now)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.inner.close()

    # -- running operations ----------------------------------------------------------------
    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`fn(*args, **kwargs)` on the pool, waited for at most `timeout_s` (inline when
        already on the pool)."""
        if getattr(_ON_POOL, "yes", False):
            return _translated(fn, *args, **kwargs)
        future = self._submit(fn, *args, **kwargs)
        try:
            return future.result(timeout=self.timeout_s)
        except concurrent.futures.TimeoutError:
            raise self._late(future) from None

    async def run(self, fn: Callable[..., T], *args: Any,
                  abandoned: Callable[[concurrent.futures.Future[T]], None] | None = None,
                  **kwargs: Any) -> T:
        """The same, awaited from the event loop. `abandoned`: called with the operation's
        future when the caller stopped waiting for it (its deadline, a cancelled request)
        although it had already started: the caller undoes what it may do."""
        future = self._submit(fn, *args, **kwargs)
        try:
            # asyncio.timeout, not wait_for: Python 3.11's wait_for returns the result when a
            # cancel and the operation's end come together, and the cancel is lost.
            async with asyncio.timeout(self.timeout_s):
                return await asyncio.shield(asyncio.wrap_future(future))
        except TimeoutError:
            error = self._late(future)
            if abandoned is not None and not future.cancelled():
                future.add_done_callback(abandoned)
            raise error from None
        except asyncio.CancelledError:
            if not future.cancel() and abandoned is not None:
                future.add_done_callback(abandoned)
            raise

    def busy(self) -> int:
        """Operations queued or running now."""
        with self._lock:
            return self._inside

    def _submit(self, fn: Callable[..., T], *args: Any,
                **kwargs: Any) -> concurrent.futures.Future[T]:
        with self._lock:
            if self._inside >= self.workers * (1 + QUEUE_FACTOR):
                self.counts["refused_busy"] += 1
                log.warning("state store %s: %d operations waiting; new ones refused",
                            self.shown, self._inside)
                raise StateUnavailable(
                    f"the state store is not keeping up: {self._inside} operations are "
                    "waiting for it; retry after the Retry-After delay")
            self._inside += 1
        try:
            future = self._pool.submit(_translated, fn, *args, **kwargs)
        except RuntimeError:  # shut down
            self._left(None)
            raise StateUnavailable("the server is shutting down") from None
        future.add_done_callback(self._left)
        return future

    def _left(self, future: concurrent.futures.Future[Any] | None) -> None:
        with self._lock:
            self._inside -= 1
        if future is not None and not future.cancelled() and future.exception() is not None:
            self.counts["failed"] += 1

    def _late(self, future: concurrent.futures.Future[Any]) -> StateUnavailable:
        """The error for a caller that waited `timeout_s`; an operation still queued is
        taken back, so it never runs."""
        future.cancel()
        self.counts["timed_out"] += 1
        log.warning("state store %s: no answer within %g s", self.shown, self.timeout_s)
        return StateUnavailable(f"the state store did not answer within {self.timeout_s:g} "
                                "s; retry after the Retry-After delay")


def _mark_pool_thread() -> None:
    _ON_POOL.yes = True


def _translated(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """A store's failure as the 503 a client gets: what failed goes to the log (StateError
    names the store, without its password, and the driver's words); the client is told
    only that the state store failed, never a connection string or a driver's message."""
    try:
        return fn(*args, **kwargs)
    except StateError as exc:
        log.warning("state store failed: %s", exc)
        what = "is full" if isinstance(exc, StoreFull) else "failed"
        raise StateUnavailable(f"the state store {what}; retry after the Retry-After "
                               "delay") from None
