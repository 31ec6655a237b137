"""`HandlerPools`: the threads sync tool handlers run on, a bounded pool per owner (the
contract's catalog `owner`), apart from the event loop's default pool and the state
store's. A handler that hangs holds one thread of its owner's pool; when all of them are
held, the next call of that owner is refused at once (`PoolFull`) instead of queueing
behind calls that may never end."""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any


class PoolFull(Exception):
    """Every thread of the owner's pool is running a handler."""


class HandlerPools:
    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._lock = threading.Lock()
        self._pools: dict[str, concurrent.futures.ThreadPoolExecutor] = {}
        self._busy: dict[str, int] = {}

    def submit(self, owner: str, fn: Callable[..., Any], *args: Any
               ) -> concurrent.futures.Future[Any]:
        with self._lock:
            if self._busy.get(owner, 0) >= self.workers:
                raise PoolFull(owner)
            self._busy[owner] = self._busy.get(owner, 0) + 1
            pool = self._pools.get(owner)
            if pool is None:
                pool = self._pools[owner] = concurrent.futures.ThreadPoolExecutor(
                    max_workers=self.workers,
                    thread_name_prefix=f"strictcall-tool-{owner[:20]}")
        future = pool.submit(fn, *args)
        future.add_done_callback(lambda _: self._left(owner))
        return future

    def busy(self) -> dict[str, int]:
        """Threads running a handler now, per owner."""
        with self._lock:
            return {owner: n for owner, n in self._busy.items() if n}

    def _left(self, owner: str) -> None:
        with self._lock:
            self._busy[owner] -= 1

    def shutdown(self) -> None:
        """Stop taking calls; threads still running (hung handlers) are left to end."""
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.shutdown(wait=False, cancel_futures=True)
