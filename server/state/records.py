"""`StateStore`: small JSON records by (namespace, key), the one interface behind
`--state-url` for everything StrictCall must remember across restarts and share between
replicas: idempotency keys and the outcomes of executions today (namespace
"idempotency", server/execution/store.py), sessions and stored responses next.

Five operations, each one atomic in every store:
- `get`: the record, or None (expired records are absent).
- `create`: store a new record, or return the one already there and change nothing: a
  claim that exactly one caller wins, however many replicas race for it.
- `put`: write; with `version`, only if the record still has that version (else
  `VersionConflict`): a read-modify-write another replica cannot interleave (a session's
  next turn appended on whichever replica gets it).
- `delete`, with `version` only if the record still has it (a claim released by the run
  that made it, never one another run made since); `now`, the store's clock: replicas
  compare a record's age with the store's clock, never their own.

And `sweep`, which deletes records that have expired (they are absent to `get` already,
but would otherwise stay on disk for ever): the sweeper (server/state/sweeper.py) calls it.

`MemoryStateStore` keeps them in a dict (tests; servers that need no memory); SQLite
(server/state/sqlite.py) is the default; Postgres (server/state/postgres.py) is for
replicas."""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

JsonObject = dict[str, Any]


@dataclass(frozen=True)
class Record:
    value: JsonObject
    version: int  # 1 when created, one more at each write
    updated: float  # the store's clock, seconds since the epoch
    expires: float | None = None  # the store's clock; None: kept until deleted


class VersionConflict(Exception):
    """`put(version=...)` found another version (or no record): read it again."""


class StateError(Exception):
    """The state store cannot be used (unreachable, or a schema newer than this code);
    the message is one line naming the fix."""


class StoreFull(StateError):
    """The store has no room left (its size bound, or the disk): a client is told that
    much, never the file or the driver's words."""


class StateStore(ABC):
    @abstractmethod
    def get(self, namespace: str, key: str) -> Record | None:
        """The record, or None when there is none or it has expired."""

    @abstractmethod
    def create(self, namespace: str, key: str, value: JsonObject, *,
               ttl_s: float | None = None) -> Record | None:
        """Atomically: store a new record (version 1) and return None, or, if a live one
        is there, change nothing and return it."""

    @abstractmethod
    def put(self, namespace: str, key: str, value: JsonObject, *, version: int | None = None,
            ttl_s: float | None = None) -> Record:
        """Write the record and return it. With `version`: only if the stored record has
        that version; otherwise (or when there is none) raise VersionConflict."""

    @abstractmethod
    def delete(self, namespace: str, key: str, *, version: int | None = None) -> bool:
        """Drop the record; False when there was none (or, with `version`, when it is at
        another version: someone changed it since it was read)."""

    @abstractmethod
    def sweep(self, *, limit: int) -> int:
        """Delete up to `limit` expired records; how many went."""

    def get_many(self, namespace: str, keys: list[str]) -> list[Record | None]:
        """The records of `keys`, in order (None where there is none); one round trip
        where the store can."""
        return [self.get(namespace, key) for key in keys]

    def touch(self, namespace: str, keys: list[str], *, ttl_s: float) -> None:
        """Push the expiry of the live records of `keys` on to now + `ttl_s` (never
        sooner than it was); their values and versions are left as they are."""
        for key in keys:
            found = self.get(namespace, key)
            if found is not None and found.expires is not None \
                    and found.expires < self.now() + ttl_s:
                self._extend(namespace, key, self.now() + ttl_s)

    def _extend(self, namespace: str, key: str, expires: float) -> None:
        raise NotImplementedError

    @abstractmethod
    def now(self) -> float:
        """The store's clock (seconds since the epoch)."""

    def close(self) -> None:  # noqa: B027 - optional hook: the memory store holds nothing
        """Release connections and files."""


class MemoryStateStore(StateStore):
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._records: dict[tuple[str, str], Record] = {}
        self._lock = threading.Lock()

    def now(self) -> float:
        return self._clock()

    def get(self, namespace: str, key: str) -> Record | None:
        with self._lock:
            return self._live(namespace, key)

    def create(self, namespace: str, key: str, value: JsonObject, *,
               ttl_s: float | None = None) -> Record | None:
        with self._lock:
            found = self._live(namespace, key)
            if found is None:
                self._records[(namespace, key)] = self._record(value, 1, ttl_s)
            return found

    def put(self, namespace: str, key: str, value: JsonObject, *, version: int | None = None,
            ttl_s: float | None = None) -> Record:
        with self._lock:
            found = self._live(namespace, key)
            if version is not None and (found is None or found.version != version):
                raise VersionConflict(f"{namespace}/{key} is not at version {version}")
            record = self._record(value, 1 if found is None else found.version + 1, ttl_s)
            self._records[(namespace, key)] = record
            return record

    def delete(self, namespace: str, key: str, *, version: int | None = None) -> bool:
        with self._lock:
            found = self._live(namespace, key)
            if found is None or (version is not None and found.version != version):
                return False
            del self._records[(namespace, key)]
            return True

    def _extend(self, namespace: str, key: str, expires: float) -> None:
        with self._lock:
            found = self._live(namespace, key)
            if found is not None:
                self._records[(namespace, key)] = Record(found.value, found.version,
                                                         found.updated, expires)

    def sweep(self, *, limit: int) -> int:
        with self._lock:
            now = self._clock()
            gone = [k for k, r in self._records.items()
                    if r.expires is not None and r.expires <= now][:limit]
            for k in gone:
                del self._records[k]
            return len(gone)

    def _live(self, namespace: str, key: str) -> Record | None:
        found = self._records.get((namespace, key))
        if found is not None and found.expires is not None and found.expires <= self._clock():
            del self._records[(namespace, key)]
            return None
        return found

    def _record(self, value: JsonObject, version: int, ttl_s: float | None) -> Record:
        now = self._clock()
        return Record(value, version, now, None if ttl_s is None else now + ttl_s)
