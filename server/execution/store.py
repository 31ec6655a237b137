"""Idempotency keys and the outcomes they lead to, so a repeated write returns its first
outcome instead of acting twice. `IdempotencyStore` is the interface (four methods); the
default keeps them in SQLite, a file under the cache dir, so a restart remembers.

A key is scoped by tenant and tool: two tenants may use the same key string. A record is
`running` from the moment a call is claimed until its outcome is stored; a claim that
finds a record gets it back instead (the caller replays its outcome, or refuses to run
while it is running or needs resolving)."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

State = Literal["running", "done"]


@dataclass(frozen=True)
class Scope:
    tenant: str | None
    tool: str
    key: str

    def id(self) -> str:
        return "\x1f".join((self.tenant or "", self.tool, self.key))


@dataclass(frozen=True)
class Stored:
    """A key's record: the arguments' fingerprint it was claimed with, its state, and once
    done, the normalized outcome (server.execution.runner.Execution.as_dict())."""

    fingerprint: str
    state: State
    outcome: dict[str, Any] | None
    updated: float


class IdempotencyStore(ABC):
    @abstractmethod
    def claim(self, scope: Scope, fingerprint: str) -> Stored | None:
        """Atomically: record `scope` as running and return None, or, if it is already
        recorded, change nothing and return its record."""

    @abstractmethod
    def finish(self, scope: Scope, outcome: dict[str, Any]) -> None:
        """Store the outcome of a claimed call (done)."""

    @abstractmethod
    def get(self, scope: Scope) -> Stored | None:
        """The record of `scope`, if any (claims nothing)."""

    @abstractmethod
    def forget(self, scope: Scope) -> bool:
        """Drop a record (a call resolved as never having acted may run again)."""

    def close(self) -> None:  # noqa: B027 - an optional hook: the memory store holds nothing
        """Release what the store holds."""


class SqliteStore(IdempotencyStore):
    """One table in one SQLite file; one connection guarded by a lock (each operation is a
    single short statement, so requests never wait long)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("""CREATE TABLE IF NOT EXISTS idempotency (
            scope TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, state TEXT NOT NULL,
            outcome TEXT, created REAL NOT NULL, updated REAL NOT NULL)""")

    def claim(self, scope: Scope, fingerprint: str) -> Stored | None:
        now = time.time()
        with self._lock:
            inserted = self._db.execute(
                "INSERT OR IGNORE INTO idempotency VALUES (?, ?, 'running', NULL, ?, ?)",
                (scope.id(), fingerprint, now, now)).rowcount
            if inserted:
                return None
        return self.get(scope)

    def get(self, scope: Scope) -> Stored | None:
        with self._lock:
            row = self._db.execute("SELECT fingerprint, state, outcome, updated FROM "
                                   "idempotency WHERE scope = ?", (scope.id(),)).fetchone()
        if row is None:
            return None
        return Stored(row[0], row[1], json.loads(row[2]) if row[2] else None, row[3])

    def finish(self, scope: Scope, outcome: dict[str, Any]) -> None:
        with self._lock:
            self._db.execute("UPDATE idempotency SET state = 'done', outcome = ?, updated = ? "
                             "WHERE scope = ?", (json.dumps(outcome), time.time(), scope.id()))

    def forget(self, scope: Scope) -> bool:
        with self._lock:
            return bool(self._db.execute("DELETE FROM idempotency WHERE scope = ?",
                                         (scope.id(),)).rowcount)

    def close(self) -> None:
        with self._lock:
            self._db.close()


class MemoryStore(IdempotencyStore):
    """The same contract in a dict: for tests, and servers that need no restart memory."""

    def __init__(self) -> None:
        self._records: dict[str, Stored] = {}
        self._lock = threading.Lock()

    def claim(self, scope: Scope, fingerprint: str) -> Stored | None:
        with self._lock:
            found = self._records.get(scope.id())
            if found is None:
                self._records[scope.id()] = Stored(fingerprint, "running", None, time.time())
            return found

    def finish(self, scope: Scope, outcome: dict[str, Any]) -> None:
        with self._lock:
            old = self._records[scope.id()]
            self._records[scope.id()] = Stored(old.fingerprint, "done", outcome, time.time())

    def get(self, scope: Scope) -> Stored | None:
        with self._lock:
            return self._records.get(scope.id())

    def forget(self, scope: Scope) -> bool:
        with self._lock:
            return self._records.pop(scope.id(), None) is not None
