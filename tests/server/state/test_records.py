"""`StateStore`'s contract, the same on every backend: create is a claim one caller wins,
put with a version is a compare-and-set, expired records are absent, the store keeps its
own clock; and SQLite and Postgres migrate their schema once, refusing a newer one."""

from __future__ import annotations

import concurrent.futures

import pytest

from server.state import StateError, StateStore, VersionConflict
from server.state.migrations import migrations


def test_create_is_a_claim_and_put_a_compare_and_set(records: StateStore):
    assert records.create("ns", "k", {"n": 1}) is None
    again = records.create("ns", "k", {"n": 2})
    assert again is not None and again.value == {"n": 1} and again.version == 1
    assert records.get("other", "k") is None  # namespaces apart
    written = records.put("ns", "k", {"n": 3}, version=1)
    assert (written.value, written.version) == ({"n": 3}, 2)
    with pytest.raises(VersionConflict):
        records.put("ns", "k", {"n": 4}, version=1)  # someone wrote version 2 meanwhile
    assert records.put("ns", "k", {"n": 5}).version == 3  # unconditional
    assert records.delete("ns", "k") and records.get("ns", "k") is None
    assert not records.delete("ns", "k")
    with pytest.raises(VersionConflict):
        records.put("ns", "k", {"n": 6}, version=3)  # gone
    assert records.put("ns", "new", {"deep": {"list": [1, "two", None]}}).version == 1
    assert records.get("ns", "new").value == {"deep": {"list": [1, "two", None]}}


def test_expired_records_are_absent_and_may_be_claimed_again(records: StateStore):
    """On the store's own clock (a database's now(), no test clock reaches it): a record
    whose time ran out a second ago is absent, one with a minute left is there; no sleep."""
    assert records.create("ns", "live", {"v": 1}, ttl_s=60) is None
    assert records.get("ns", "live") is not None
    assert records.create("ns", "short", {"v": 1}, ttl_s=-1) is None
    assert records.get("ns", "short") is None
    assert records.create("ns", "short", {"v": 2}) is None  # claimed anew
    kept = records.get("ns", "short")
    assert kept.value == {"v": 2} and kept.version == 1 and kept.expires is None


def test_the_store_clock_dates_records(records: StateStore):
    before = records.now()
    records.create("ns", "k", {})
    found = records.get("ns", "k")
    assert before - 1 <= found.updated <= records.now() + 1


def test_many_claims_at_once_have_one_winner(records: StateStore):
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda i: records.create("ns", "race", {"by": i}), range(40)))
    assert results.count(None) == 1
    winner = records.get("ns", "race").value["by"]
    assert all(r.value["by"] == winner for r in results if r is not None)


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_migrations_are_numbered_without_gaps(dialect):
    found = migrations(dialect)
    assert [m.version for m in found] == list(range(1, len(found) + 1))
    assert all(m.statements() for m in found)


def test_sqlite_migrates_once_and_refuses_a_newer_schema(tmp_path):
    import sqlite3

    from server.state.sqlite import SqliteStateStore

    path = tmp_path / "s.sqlite3"
    SqliteStateStore(path).close()
    SqliteStateStore(path).close()  # nothing left to apply
    with sqlite3.connect(path) as db:
        versions = [r[0] for r in db.execute("SELECT version FROM strictcall_migrations")]
        assert versions == [m.version for m in migrations("sqlite")]
        db.execute("INSERT INTO strictcall_migrations VALUES (99, '099_future.sql', 0)")
    with pytest.raises(StateError, match="schema version 99, newer than this StrictCall"):
        SqliteStateStore(path)


def test_keys_of_a_tools_db_from_before_move_into_records(tmp_path):
    """--tools-db files kept their keys in an `idempotency` table: after the upgrade the
    same key still replays its outcome."""
    import sqlite3

    from server.execution import Scope, SqliteStore

    path = tmp_path / "tools.sqlite3"
    scope = Scope("acme", "refund_order", "idem_1")
    with sqlite3.connect(path) as db:
        db.execute("""CREATE TABLE idempotency (scope TEXT PRIMARY KEY, fingerprint TEXT NOT
            NULL, state TEXT NOT NULL, outcome TEXT, created REAL NOT NULL, updated REAL
            NOT NULL)""")
        db.execute("INSERT INTO idempotency VALUES (?, 'fp', 'done', ?, 1, 2)",
                   (scope.id(), '{"outcome": "succeeded", "result": 7}'))
    store = SqliteStore(path)
    try:
        found = store.claim(scope, "fp")
        assert found.state == "done" and found.outcome == {"outcome": "succeeded",
                                                           "result": 7}
    finally:
        store.close()


@pytest.mark.replicas
@pytest.mark.slow
def test_postgres_replicas_starting_together_migrate_once(postgres):
    import psycopg

    from server.state.postgres import PostgresStateStore

    url = postgres.database()
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        stores = list(pool.map(lambda _: PostgresStateStore(url, shown=url), range(4)))
    for store in stores:
        store.close()
    with psycopg.connect(url) as db:
        versions = [r[0] for r in db.execute("SELECT version FROM strictcall_migrations")]
    assert versions == [m.version for m in migrations("postgres")]


@pytest.mark.replicas
@pytest.mark.slow
def test_an_unreachable_postgres_is_one_line(postgres):
    from server.state.postgres import PostgresStateStore
    from tests.real_servers import free_port

    url = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"
    with pytest.raises(StateError, match="cannot reach the state database .* is Postgres up"):
        PostgresStateStore(url, shown=url, connect_timeout_s=1)


def test_a_default_tools_db_from_before_is_adopted_once(tmp_path, monkeypatch):
    """The default file was <cache dir>/tools.sqlite3: the new default state file starts
    from a copy of it, so keys claimed before the upgrade still replay."""
    from server.execution import RecordStore, Scope, SqliteStore
    from server.settings import Settings
    from server.state import open_state

    monkeypatch.delenv("STRICTCALL_TOOLS_DB", raising=False)  # tests/conftest.py sets it
    scope = Scope(None, "t", "k")
    old = SqliteStore(tmp_path / "tools.sqlite3")
    old.claim(scope, "fp")
    old.finish(scope, {"outcome": "succeeded"})
    old.close()
    state = open_state(Settings(cache_dir=tmp_path))
    try:
        assert RecordStore(state, owned=False).get(scope).outcome == {"outcome": "succeeded"}
    finally:
        state.close()
    assert (tmp_path / "state.sqlite3").exists() and (tmp_path / "tools.sqlite3").exists()
