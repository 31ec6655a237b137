"""An idempotency key is remembered `--idempotency-ttl-s` after its last change, then
forgotten: within the TTL a repeated write replays its first outcome; after it, the same key
runs the handler again. Held on the store (memory and SQLite, each on a test clock) and on
the invoke path (ToolService over KeyedRuns), where forgetting means a new execution."""

from __future__ import annotations

import asyncio
import types

import pytest

from server.execution import RecordStore, Scope, ToolPolicy, Tracing
from server.execution.journal import OutcomeJournal
from server.execution.keyed import KeyedRuns
from server.execution.runner import Runner
from server.execution.service import ToolService
from server.identity import Caller
from server.state import MemoryStateStore
from server.state.timed import TimedStateStore
from server.wiring import load_contracts
from tests.server.execution.exec_contracts import LEDGER
from tests.server.state.conftest import Clock

SCOPE = Scope("acme", "refund_order", "idem-ttl-1")
TTL_S = 60.0
DONE = {"outcome": "succeeded", "result": {"refund_id": "RF-0001"}}


@pytest.fixture(params=["memory", "sqlite"])
def aged(request, tmp_path, monkeypatch):
    """An idempotency store with a TTL of `TTL_S` and the test clock its state store reads:
    the memory store takes the clock; SQLite reads `time.time()`, which is the clock here
    (only inside server.state.sqlite), so neither sleeps."""
    clock = Clock()
    if request.param == "memory":
        records = MemoryStateStore(clock)
    else:
        import server.state.sqlite as sqlite

        monkeypatch.setattr(sqlite, "time", types.SimpleNamespace(time=clock))
        records = sqlite.SqliteStateStore(tmp_path / "state.sqlite3")
    store = RecordStore(records, ttl_s=TTL_S)
    yield store, clock
    store.close()


def done_key(store: RecordStore) -> None:
    assert store.claim(SCOPE, "fp", token="first") is None
    assert store.finish(SCOPE, DONE, token="first")


def test_a_done_key_is_replayed_until_its_ttl_runs_out(aged):
    store, clock = aged
    done_key(store)
    clock.now += TTL_S - 1
    replayed = store.claim(SCOPE, "fp", token="retry")
    assert replayed is not None, "a key inside its TTL was forgotten"
    assert (replayed.state, replayed.outcome, replayed.token) == ("done", DONE, "first")
    clock.now += 2  # one second past the TTL of the finish
    assert store.get(SCOPE) is None
    assert store.claim(SCOPE, "fp", token="second") is None  # claimed anew: it runs again
    again = store.get(SCOPE)
    assert (again.state, again.outcome, again.token) == ("running", None, "second")


def test_the_ttl_counts_from_the_keys_last_change_not_its_claim(aged):
    """A run that took most of the TTL is still remembered a whole TTL after its outcome
    was stored: a client retrying just after the answer must get a replay."""
    store, clock = aged
    assert store.claim(SCOPE, "fp", token="first") is None
    clock.now += TTL_S - 5
    assert store.renew(SCOPE, token="first")  # the run's lease, renewed as it goes on
    clock.now += TTL_S - 5  # past the claim's TTL, inside the renewal's
    assert store.finish(SCOPE, DONE, token="first")
    clock.now += TTL_S - 1
    assert store.get(SCOPE).outcome == DONE
    clock.now += 2
    assert store.get(SCOPE) is None


def test_a_settled_stale_key_is_forgotten_after_its_ttl_too(aged):
    """A side_effect_unknown settlement blocks the key only for the TTL, like any outcome."""
    store, clock = aged
    assert store.claim(SCOPE, "fp", token="lost") is None
    clock.now += 20
    lost = {"outcome": "side_effect_unknown"}
    assert store.settle_stale(SCOPE, older_than_s=15, outcome=lost).stale
    clock.now += TTL_S - 1
    assert store.claim(SCOPE, "fp", token="retry").outcome == lost
    clock.now += 2
    assert store.claim(SCOPE, "fp", token="retry") is None


@pytest.fixture()
def service():
    """The invoke path over a memory state store on the test clock, as server/wiring.py
    builds it (a RecordStore with the TTL, KeyedRuns, ToolService), with an allow-all
    policy and the execution tests' contracts (refund_order: a sync write that counts its
    runs in LEDGER)."""
    LEDGER.clear()
    clock = Clock()
    state = TimedStateStore(MemoryStateStore(clock), workers=2, timeout_s=5, shown="memory")
    runs = KeyedRuns(RecordStore(state, owned=False, ttl_s=TTL_S), state,
                     OutcomeJournal(None), lease_s=15)
    runner = Runner(lambda owner: None, workers_per_owner=2)
    tools = ToolService(load_contracts(["tests.server.execution.exec_contracts"]),
                        ToolPolicy(), runs=runs, runner=runner, tracing=Tracing())
    yield tools, clock
    runner.pools.shutdown()
    state.close()


def refund(tools: ToolService, key: str) -> dict:
    invoked = asyncio.run(tools.invoke("refund_order", {"order_id": "ORD-123", "amount": 5},
                                       key, Caller({"X-Tenant-Id": "acme"})))
    assert invoked.status == 200, invoked.body
    return invoked.body


def test_an_invoked_write_replays_within_the_ttl_and_runs_again_after_it(service):
    tools, clock = service
    first = refund(tools, "idem-ttl-2")
    assert (first["outcome"], first["replayed"], LEDGER["refund"]) == ("succeeded", False, 1)
    clock.now += TTL_S - 1
    again = refund(tools, "idem-ttl-2")
    assert again["replayed"] and again["result"] == first["result"]
    assert LEDGER["refund"] == 1  # not run again
    clock.now += 2
    after = refund(tools, "idem-ttl-2")
    assert after["outcome"] == "succeeded" and not after["replayed"]
    assert LEDGER["refund"] == 2  # the forgotten key ran the handler anew
    assert after["result"]["refund_id"] != first["result"]["refund_id"]
