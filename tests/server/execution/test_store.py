"""The idempotency store's contract, on SQLite and in memory: a key is claimed once, its
outcome stored, read back after a restart (SQLite), and forgotten on resolution."""

from __future__ import annotations

import pytest

from server.execution import MemoryStore, Scope, SqliteStore


@pytest.fixture(params=["sqlite", "memory"])
def store(request, tmp_path):
    made = SqliteStore(tmp_path / "t.sqlite3") if request.param == "sqlite" else MemoryStore()
    yield made
    made.close()


def test_a_key_is_claimed_once_then_replayed(store):
    scope = Scope("acme", "refund_order", "idem_1")
    assert store.claim(scope, "fp") is None
    running = store.claim(scope, "fp")
    assert running.state == "running" and running.outcome is None
    store.finish(scope, {"outcome": "succeeded", "result": 1})
    done = store.claim(scope, "fp")
    assert (done.state, done.outcome["result"]) == ("done", 1)
    assert store.claim(Scope("other", "refund_order", "idem_1"), "fp") is None  # per tenant
    assert store.forget(scope) and store.get(scope) is None and not store.forget(scope)


def test_sqlite_remembers_across_restarts(tmp_path):
    scope = Scope(None, "t", "k")
    first = SqliteStore(tmp_path / "t.sqlite3")
    first.claim(scope, "fp")
    first.finish(scope, {"outcome": "side_effect_unknown"})
    first.close()
    again = SqliteStore(tmp_path / "t.sqlite3")
    try:
        assert again.get(scope).outcome == {"outcome": "side_effect_unknown"}
    finally:
        again.close()
