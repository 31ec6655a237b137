"""`SqliteStateStore`: the records in one SQLite file (the default, `sqlite:///<cache
dir>/state.sqlite3`): one process's memory across restarts, not shared by replicas. One
connection guarded by a lock; every operation is one short statement. `max_bytes` bounds
the file (SQLite's max_page_count): a store that is full refuses writes with a StateError
as every other failure of the file is one (503 to a client, never a 500)."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from server.state.migrations import VERSION_TABLE, pending
from server.state.records import (
    JsonObject,
    Record,
    StateError,
    StateStore,
    StoreFull,
    VersionConflict,
)

_COLUMNS = "value, version, updated, expires"


class SqliteStateStore(StateStore):
    def __init__(self, path: Path, *, max_bytes: int | None = None,
                 busy_timeout_s: float = 5.0) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None,
                                   timeout=busy_timeout_s)
        self._db.execute("PRAGMA journal_mode=WAL")
        if max_bytes is not None:
            page = int(self._db.execute("PRAGMA page_size").fetchone()[0])
            self._db.execute(f"PRAGMA max_page_count = {max(8, max_bytes // page)}")
        self._migrate()

    def _migrate(self) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")  # one process migrates; others wait
            try:
                self._db.execute(VERSION_TABLE)
                applied = {row[0] for row in
                           self._db.execute("SELECT version FROM strictcall_migrations")}
                for migration in pending("sqlite", applied, where=str(self.path)):
                    for statement in migration.statements():
                        self._db.execute(statement)
                    self._db.execute("INSERT INTO strictcall_migrations VALUES (?, ?, ?)",
                                     (migration.version, migration.name, time.time()))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def now(self) -> float:
        return time.time()

    def get(self, namespace: str, key: str) -> Record | None:
        with self._failures():
            row = self._db.execute(
                f"SELECT {_COLUMNS} FROM records WHERE namespace = ? AND key = ? AND "
                "(expires IS NULL OR expires > ?)", (namespace, key, time.time())).fetchone()
        return _record(row)

    def create(self, namespace: str, key: str, value: JsonObject, *,
               ttl_s: float | None = None) -> Record | None:
        now = time.time()
        with self._failures():
            # A record that has expired is replaced; a live one is left as it is.
            created = self._db.execute(
                "INSERT INTO records VALUES (?, ?, ?, 1, ?, ?) ON CONFLICT (namespace, key) "
                "DO UPDATE SET value = excluded.value, version = 1, updated = excluded.updated,"
                " expires = excluded.expires WHERE records.expires IS NOT NULL AND "
                "records.expires <= excluded.updated",
                (namespace, key, json.dumps(value), now, _expiry(now, ttl_s))).rowcount
        return None if created else self.get(namespace, key)

    def put(self, namespace: str, key: str, value: JsonObject, *, version: int | None = None,
            ttl_s: float | None = None) -> Record:
        now = time.time()
        text, expires = json.dumps(value), _expiry(now, ttl_s)
        with self._failures():
            if version is None:
                row = self._db.execute(
                    "INSERT INTO records VALUES (?, ?, ?, 1, ?, ?) ON CONFLICT (namespace, key) "
                    "DO UPDATE SET value = excluded.value, updated = excluded.updated, "
                    "expires = excluded.expires, version = CASE WHEN records.expires IS NOT "
                    "NULL AND records.expires <= excluded.updated THEN 1 ELSE "
                    f"records.version + 1 END RETURNING {_COLUMNS}",
                    (namespace, key, text, now, expires)).fetchone()
            else:
                row = self._db.execute(
                    "UPDATE records SET value = ?, version = version + 1, updated = ?, "
                    "expires = ? WHERE namespace = ? AND key = ? AND version = ? AND "
                    f"(expires IS NULL OR expires > ?) RETURNING {_COLUMNS}",
                    (text, now, expires, namespace, key, version, now)).fetchone()
        record = _record(row)
        if record is None:
            raise VersionConflict(f"{namespace}/{key} is not at version {version}")
        return record

    def delete(self, namespace: str, key: str, *, version: int | None = None) -> bool:
        live = "(expires IS NULL OR expires > ?)"
        with self._failures():
            if version is None:
                return bool(self._db.execute(
                    f"DELETE FROM records WHERE namespace = ? AND key = ? AND {live}",
                    (namespace, key, time.time())).rowcount)
            return bool(self._db.execute(
                f"DELETE FROM records WHERE namespace = ? AND key = ? AND version = ? AND {live}",
                (namespace, key, version, time.time())).rowcount)

    def touch(self, namespace: str, keys: list[str], *, ttl_s: float) -> None:
        now = time.time()
        with self._failures():
            self._db.executemany(
                "UPDATE records SET expires = ? WHERE namespace = ? AND key = ? AND expires "
                "IS NOT NULL AND expires > ? AND expires < ?",
                [(now + ttl_s, namespace, key, now, now + ttl_s) for key in keys])

    def sweep(self, *, limit: int) -> int:
        with self._failures():
            return self._db.execute(
                "DELETE FROM records WHERE rowid IN (SELECT rowid FROM records WHERE expires "
                "IS NOT NULL AND expires <= ? LIMIT ?)", (time.time(), limit)).rowcount

    @contextlib.contextmanager
    def _failures(self) -> Iterator[None]:
        """Under the connection's lock; the file's failures (full, locked, unreadable) as
        one StateError naming it."""
        with self._lock:
            try:
                yield
            except sqlite3.Error as exc:
                full = "full" in str(exc)
                error = StoreFull if full else StateError
                raise error(f"the state file {self.path}: {exc}" + (
                    " (the store is full: raise --state-max-bytes, lower the retention "
                    "settings, or free the disk)" if full else "")) from None

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _expiry(now: float, ttl_s: float | None) -> float | None:
    return None if ttl_s is None else now + ttl_s


def _record(row: tuple[str, int, float, float | None] | None) -> Record | None:
    if row is None:
        return None
    return Record(json.loads(row[0]), int(row[1]), float(row[2]), row[3])
