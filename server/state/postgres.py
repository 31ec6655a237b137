"""`PostgresStateStore`: the records in Postgres (`--state-url postgresql://...`), shared by
every replica, through a psycopg 3 connection pool. Each operation is one statement in its
own transaction; `create` is `INSERT ... ON CONFLICT DO NOTHING`-shaped, so of any number of
replicas claiming one key at once exactly one inserts and the others read its record.
Times are the database's clock, one for all replicas.

Migrations run at startup under an advisory lock, so replicas starting together apply each
one once."""

from __future__ import annotations

import time
from typing import Any

from server.state.migrations import VERSION_TABLE, pending
from server.state.records import JsonObject, Record, StateError, StateStore, VersionConflict

_COLUMNS = "value, version, updated, expires"
_NOW = "extract(epoch from clock_timestamp())::double precision"
_EXPIRES = f"{_NOW} + %s::double precision"  # NULL ttl: no expiry
_MIGRATION_LOCK = 0x5354_4341_4C4C  # "STCALL": one advisory lock id for the migrations


class PostgresStateStore(StateStore):
    def __init__(self, url: str, *, shown: str, min_size: int = 1, max_size: int = 10,
                 connect_timeout_s: float = 10.0) -> None:
        from psycopg_pool import ConnectionPool, PoolTimeout

        self.shown = shown  # the URL without its password, for messages
        self._pool = ConnectionPool(url, min_size=min_size, max_size=max_size, open=False,
                                    kwargs={"autocommit": True}, name="strictcall-state")
        try:
            self._pool.open(wait=True, timeout=connect_timeout_s)
        except PoolTimeout:
            self._pool.close()
            raise StateError(f"cannot reach the state database {shown} in "
                             f"{connect_timeout_s:g} s; is Postgres up and the URL right?"
                             ) from None
        self._migrate()

    def _migrate(self) -> None:
        with self._pool.connection() as db, db.transaction():
            db.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            db.execute(VERSION_TABLE)
            applied = {row[0] for row in db.execute("SELECT version FROM strictcall_migrations")}
            for migration in pending("postgres", applied, where=self.shown):
                db.execute(migration.sql.encode())  # no parameters: several statements
                db.execute("INSERT INTO strictcall_migrations VALUES (%s, %s, %s)",
                           (migration.version, migration.name, time.time()))

    def now(self) -> float:
        return float(self._one(f"SELECT {_NOW}", ())[0])

    def get(self, namespace: str, key: str) -> Record | None:
        return _record(self._row(
            f"SELECT {_COLUMNS} FROM records WHERE namespace = %s AND key = %s AND "
            f"(expires IS NULL OR expires > {_NOW})", (namespace, key)))

    def create(self, namespace: str, key: str, value: JsonObject, *,
               ttl_s: float | None = None) -> Record | None:
        from psycopg.types.json import Jsonb

        while True:
            # The claim: one statement, one transaction; a concurrent one waits for this
            # one's commit and then finds the row. A record that has expired is replaced.
            created = self._row(
                "INSERT INTO records AS r VALUES (%s, %s, %s, 1, "
                f"{_NOW}, {_EXPIRES}) ON CONFLICT (namespace, key) DO UPDATE SET "
                "value = excluded.value, version = 1, updated = excluded.updated, "
                "expires = excluded.expires WHERE r.expires IS NOT NULL AND "
                "r.expires <= excluded.updated RETURNING version",
                (namespace, key, Jsonb(value), ttl_s))
            if created is not None:
                return None
            found = self.get(namespace, key)
            if found is not None:
                return found
            # Deleted (or expired) between the two statements: claim again.

    def put(self, namespace: str, key: str, value: JsonObject, *, version: int | None = None,
            ttl_s: float | None = None) -> Record:
        from psycopg.types.json import Jsonb

        if version is None:
            row = self._row(
                "INSERT INTO records AS r VALUES (%s, %s, %s, 1, "
                f"{_NOW}, {_EXPIRES}) ON CONFLICT (namespace, key) DO UPDATE SET "
                "value = excluded.value, updated = excluded.updated, expires = "
                "excluded.expires, version = CASE WHEN r.expires IS NOT NULL AND r.expires <= "
                f"excluded.updated THEN 1 ELSE r.version + 1 END RETURNING {_COLUMNS}",
                (namespace, key, Jsonb(value), ttl_s))
        else:
            row = self._row(
                f"UPDATE records SET value = %s, version = version + 1, updated = {_NOW}, "
                f"expires = {_EXPIRES} WHERE namespace = %s AND key = %s AND version = %s "
                f"AND (expires IS NULL OR expires > {_NOW}) RETURNING {_COLUMNS}",
                (Jsonb(value), ttl_s, namespace, key, version))
        record = _record(row)
        if record is None:
            raise VersionConflict(f"{namespace}/{key} is not at version {version}")
        return record

    def delete(self, namespace: str, key: str) -> bool:
        with self._pool.connection() as db:
            return db.execute("DELETE FROM records WHERE namespace = %s AND key = %s",
                              (namespace, key)).rowcount > 0

    def close(self) -> None:
        self._pool.close()

    def _row(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
        with self._pool.connection() as db:
            return db.execute(sql.encode(), params).fetchone()

    def _one(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...]:
        row = self._row(sql, params)
        assert row is not None
        return row


def _record(row: tuple[Any, ...] | None) -> Record | None:
    if row is None:
        return None
    expires = row[3]
    return Record(dict(row[0]), int(row[1]), float(row[2]),
                  None if expires is None else float(expires))
