"""`PostgresStateStore`: the records in Postgres (`--state-url postgresql://...`), shared by
every replica, through a psycopg 3 connection pool. Each operation is one statement in its
own transaction; `create` is `INSERT ... ON CONFLICT DO NOTHING`-shaped, so of any number of
replicas claiming one key at once exactly one inserts and the others read its record.
Times are the database's clock, one for all replicas.

Migrations run at startup under an advisory lock, so replicas starting together apply each
one once.

Nothing waits without a bound: a connection is made within `connect_timeout_s`, a
statement runs at most `statement_timeout_s` on the server, a free connection is waited
for at most `pool_timeout_s`, and TCP keepalives notice a peer that went away. Every
failure of the database is a `StateError` (503 to a client, server/state/timed.py); a
database that stops answering without closing its sockets (paused) is bounded by the
caller's deadline instead, since no server-side timeout can fire then."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from typing import Any

from server.state.migrations import VERSION_TABLE, pending
from server.state.records import JsonObject, Record, StateError, StateStore, VersionConflict

_COLUMNS = "value, version, updated, expires"
_NOW = "extract(epoch from clock_timestamp())::double precision"
_EXPIRES = f"{_NOW} + %s::double precision"  # NULL ttl: no expiry
_MIGRATION_LOCK = 0x5354_4341_4C4C  # "STCALL": one advisory lock id for the migrations


class PostgresStateStore(StateStore):
    def __init__(self, url: str, *, shown: str, min_size: int = 1, max_size: int = 10,
                 connect_timeout_s: float = 10.0, statement_timeout_s: float = 5.0,
                 pool_timeout_s: float = 5.0) -> None:
        from psycopg_pool import ConnectionPool, PoolTimeout

        self.shown = shown  # the URL without its password, for messages
        self._pool = ConnectionPool(
            url, min_size=min_size, max_size=max_size, open=False, name="strictcall-state",
            timeout=pool_timeout_s, check=ConnectionPool.check_connection,
            kwargs=connection_options(connect_timeout_s, statement_timeout_s))
        try:
            self._pool.open(wait=True, timeout=connect_timeout_s)
        except PoolTimeout:
            self._pool.close()
            raise StateError(f"cannot reach the state database {shown} in "
                             f"{connect_timeout_s:g} s; is Postgres up and the URL right?"
                             ) from None
        self._migrate()

    def _migrate(self) -> None:
        with self._failures(), self._pool.connection() as db, db.transaction():
            # A migration (or waiting for another replica's) may take longer than a request.
            db.execute("SET LOCAL statement_timeout = 0; SET LOCAL lock_timeout = 0")
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

    def delete(self, namespace: str, key: str, *, version: int | None = None) -> bool:
        if version is None:
            return self._count("DELETE FROM records WHERE namespace = %s AND key = %s AND "
                               f"(expires IS NULL OR expires > {_NOW})", (namespace, key)) > 0
        return self._count("DELETE FROM records WHERE namespace = %s AND key = %s AND "
                           f"version = %s AND (expires IS NULL OR expires > {_NOW})",
                           (namespace, key, version)) > 0

    def get_many(self, namespace: str, keys: list[str]) -> list[Record | None]:
        with self._failures(), self._pool.connection() as db:
            rows = db.execute(
                f"SELECT key, {_COLUMNS} FROM records WHERE namespace = %s AND key = ANY(%s) "
                f"AND (expires IS NULL OR expires > {_NOW})".encode(),
                (namespace, keys)).fetchall()
        found = {row[0]: _record(row[1:]) for row in rows}
        return [found.get(key) for key in keys]

    def touch(self, namespace: str, keys: list[str], *, ttl_s: float) -> None:
        self._count(f"UPDATE records SET expires = {_EXPIRES} WHERE namespace = %s AND "
                    f"key = ANY(%s) AND expires IS NOT NULL AND expires > {_NOW} AND "
                    f"expires < {_EXPIRES}", (ttl_s, namespace, keys, ttl_s))

    def sweep(self, *, limit: int) -> int:
        # ctid: one batch, however many have expired, so a sweep never holds locks long.
        return self._count(
            "DELETE FROM records WHERE ctid = ANY(ARRAY(SELECT ctid FROM records WHERE "
            f"expires IS NOT NULL AND expires <= {_NOW} LIMIT %s))", (limit,))

    def close(self) -> None:
        self._pool.close()

    def _row(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
        with self._failures(), self._pool.connection() as db:
            return db.execute(sql.encode(), params).fetchone()

    def _one(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...]:
        row = self._row(sql, params)
        assert row is not None
        return row

    def _count(self, sql: str, params: tuple[Any, ...]) -> int:
        with self._failures(), self._pool.connection() as db:
            return db.execute(sql.encode(), params).rowcount

    @contextlib.contextmanager
    def _failures(self) -> Iterator[None]:
        """The database's failures (gone, restarting, a statement past its time, no free
        connection) as one StateError naming the store."""
        import psycopg
        from psycopg_pool import PoolTimeout

        try:
            yield
        except PoolTimeout:
            raise StateError(f"the state database {self.shown}: no free connection in "
                             "time (it is slow or unreachable)") from None
        except psycopg.Error as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StateError(f"the state database {self.shown}: {first[:200]}") from None


def connection_options(connect_timeout_s: float, statement_timeout_s: float
                       ) -> dict[str, Any]:
    """libpq options of every connection: bounded connects and statements, and keepalives
    so a peer that vanished (a lost node) is noticed in seconds, not hours."""
    return {"autocommit": True, "connect_timeout": max(1, math.ceil(connect_timeout_s)),
            "options": f"-c statement_timeout={int(statement_timeout_s * 1000)} "
                       f"-c lock_timeout={int(statement_timeout_s * 1000)}",
            "keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5,
            "keepalives_count": 3, "tcp_user_timeout": int(statement_timeout_s * 2000)}


def _record(row: tuple[Any, ...] | None) -> Record | None:
    if row is None:
        return None
    expires = row[3]
    return Record(dict(row[0]), int(row[1]), float(row[2]),
                  None if expires is None else float(expires))
