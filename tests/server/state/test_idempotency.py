"""The idempotency store on each state backend (memory, SQLite; Postgres in the replicas
tier): a key is claimed once however many callers race, its outcome replayed; a key left
running past its call's time is settled as side_effect_unknown once, by whoever looks
first; a late finish and a settle never overwrite each other unseen."""

from __future__ import annotations

import concurrent.futures
import time

from server.execution import RecordStore, Scope
from server.execution.stale import STALE_GRACE_S, settle_if_stale, stale_after_s
from server.state import MemoryStateStore
from tests.server.execution.exec_contracts import LookupOrder  # noqa: F401 - registers contracts
from tests.server.state.conftest import Clock

SCOPE = Scope("acme", "refund_order", "idem_1")


def test_forty_racing_claims_have_one_winner_and_then_replay(records):
    store = RecordStore(records, owned=False)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        claims = list(pool.map(lambda _: store.claim(SCOPE, "fp"), range(40)))
    assert claims.count(None) == 1
    assert all(c.state == "running" for c in claims if c is not None)
    store.finish(SCOPE, {"outcome": "succeeded", "result": 1})
    done = store.claim(SCOPE, "fp")
    assert (done.state, done.outcome["result"]) == ("done", 1)


def test_a_running_key_is_settled_only_once_it_is_stale(records):
    store = RecordStore(records, owned=False)
    assert store.claim(SCOPE, "fp") is None
    lost = {"outcome": "side_effect_unknown"}
    assert store.settle_stale(SCOPE, older_than_s=60, outcome=lost) is None  # still young
    assert store.get(SCOPE).state == "running"
    time.sleep(0.3)
    settled = store.settle_stale(SCOPE, older_than_s=0.2, outcome=lost)
    assert settled.state == "done" and settled.outcome == lost
    assert store.settle_stale(SCOPE, older_than_s=0.2, outcome={"outcome": "x"}) is None
    assert store.get(SCOPE).outcome == lost  # a done key is never settled again


def test_the_settled_outcome_names_the_fix_and_waits_for_the_call_time():
    from contracts import ContractRegistry

    registry = ContractRegistry()
    registry.load("tests.server.execution.exec_contracts")
    contract = registry.get("refund_order")
    assert stale_after_s(contract) == contract.execution.timeout_s + STALE_GRACE_S
    clock = Clock()
    store = RecordStore(MemoryStateStore(clock))
    store.claim(SCOPE, "fp")
    clock.now += stale_after_s(contract) - 0.1
    assert settle_if_stale(store, SCOPE, contract) is None
    clock.now += 0.2
    settled = settle_if_stale(store, SCOPE, contract)
    assert settled.outcome["outcome"] == "side_effect_unknown"
    assert "resolve" in settled.outcome["problem"]["detail"]


def test_finish_after_forget_does_not_bring_the_key_back(records):
    store = RecordStore(records, owned=False)
    store.claim(SCOPE, "fp")
    assert store.forget(SCOPE)
    store.finish(SCOPE, {"outcome": "succeeded"})
    assert store.get(SCOPE) is None
