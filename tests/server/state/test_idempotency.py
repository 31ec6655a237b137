"""The idempotency store on each state backend (memory, SQLite; Postgres in the replicas
tier): a key is claimed once however many callers race, its outcome replayed; a key whose
lease ran out is settled as side_effect_unknown once, by whoever looks first; and fencing:
a finish, renewal or release names its claim's token, so a run whose key was resolved and
claimed again never overwrites the newer run's record."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Iterator

import pytest

from server.execution import RecordStore, Scope
from server.execution.journal import OutcomeJournal
from server.execution.keyed import KeyedRuns
from server.state import MemoryStateStore, StateStore
from server.state.timed import TimedStateStore
from tests.server.state.conftest import BACKENDS, Clock, open_backend

SCOPE = Scope("acme", "refund_order", "idem_1")


@pytest.fixture(params=BACKENDS)
def aging(request, tmp_path) -> Iterator[tuple[StateStore, Callable[[float], None]]]:
    """A state store and how to let `seconds` pass on its clock: the memory store runs on
    a test clock, moved exactly; SQLite (time.time()) and Postgres (the database's clock)
    take no clock of the test's, so for them the test sleeps."""
    if request.param == "memory":
        clock = Clock()

        def wait(seconds: float) -> None:
            clock.now += seconds

        store: StateStore = MemoryStateStore(clock)
    else:
        store, wait = open_backend(request.param, request, tmp_path), time.sleep
    yield store, wait
    store.close()


def test_forty_racing_claims_have_one_winner_and_then_replay(records):
    store = RecordStore(records, owned=False)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        claims = list(pool.map(lambda i: store.claim(SCOPE, "fp", token=f"t{i}"), range(40)))
    assert claims.count(None) == 1
    winner = f"t{claims.index(None)}"
    assert all(c.state == "running" and c.token == winner for c in claims if c is not None)
    assert not store.finish(SCOPE, {"outcome": "succeeded", "result": 2}, token="t-other")
    assert store.finish(SCOPE, {"outcome": "succeeded", "result": 1}, token=winner)
    done = store.claim(SCOPE, "fp", token="late")
    assert (done.state, done.outcome["result"]) == ("done", 1)


def test_a_running_key_is_settled_only_once_it_is_stale(aging):
    records, wait = aging
    store = RecordStore(records, owned=False)
    assert store.claim(SCOPE, "fp", token="a") is None
    lost = {"outcome": "side_effect_unknown"}
    assert store.settle_stale(SCOPE, older_than_s=60, outcome=lost) is None  # still young
    assert store.get(SCOPE).state == "running"
    wait(0.3)
    assert store.renew(SCOPE, token="a")  # a renewed lease is young again
    assert store.settle_stale(SCOPE, older_than_s=0.2, outcome=lost) is None
    wait(0.3)
    settled = store.settle_stale(SCOPE, older_than_s=0.2, outcome=lost)
    assert settled.state == "done" and settled.outcome == lost and settled.stale
    assert store.settle_stale(SCOPE, older_than_s=0.2, outcome={"outcome": "x"}) is None
    assert store.get(SCOPE).outcome == lost  # a done key is never settled again


def test_the_runs_own_late_outcome_replaces_a_stale_settlement(aging):
    records, wait = aging
    store = RecordStore(records, owned=False)
    store.claim(SCOPE, "fp", token="a")
    wait(0.2)
    store.settle_stale(SCOPE, older_than_s=0.1, outcome={"outcome": "side_effect_unknown"})
    assert store.finish(SCOPE, {"outcome": "succeeded", "result": 9}, token="a")
    assert store.get(SCOPE).outcome == {"outcome": "succeeded", "result": 9}
    assert not store.finish(SCOPE, {"outcome": "succeeded", "result": 10}, token="a")


def test_a_late_finish_of_a_resolved_then_rerun_key_is_refused(aging):
    """Run A hangs, the key is resolved as never done, run B claims and finishes it:
    A's late finish names A's token and changes nothing."""
    records, wait = aging
    store = RecordStore(records, owned=False)
    store.claim(SCOPE, "fp", token="a")
    wait(0.2)
    store.settle_stale(SCOPE, older_than_s=0.1, outcome={"outcome": "side_effect_unknown"})
    assert store.resolve(SCOPE, None, version=store.get(SCOPE).version)
    assert store.claim(SCOPE, "fp", token="b") is None
    assert store.finish(SCOPE, {"outcome": "succeeded", "result": "B"}, token="b")
    assert not store.finish(SCOPE, {"outcome": "succeeded", "result": "A"}, token="a")
    assert not store.release(SCOPE, token="a") and not store.renew(SCOPE, token="a")
    assert store.get(SCOPE).outcome["result"] == "B"


def test_a_resolution_as_succeeded_refuses_the_runs_late_outcome(aging):
    records, wait = aging
    store = RecordStore(records, owned=False)
    store.claim(SCOPE, "fp", token="a")
    wait(0.2)
    store.settle_stale(SCOPE, older_than_s=0.1, outcome={"outcome": "side_effect_unknown"})
    seen = store.get(SCOPE)
    assert store.resolve(SCOPE, {"outcome": "succeeded", "result": "ops"}, version=seen.version)
    assert not store.resolve(SCOPE, None, version=seen.version)  # it changed since
    assert not store.finish(SCOPE, {"outcome": "succeeded", "result": "A"}, token="a")
    found = store.get(SCOPE)
    assert found.resolved and found.outcome["result"] == "ops"


def test_release_drops_only_the_runs_own_running_claim(records):
    store = RecordStore(records, owned=False)
    store.claim(SCOPE, "fp", token="a")
    assert not store.release(SCOPE, token="b")
    assert store.release(SCOPE, token="a") and store.get(SCOPE) is None
    store.claim(SCOPE, "fp", token="c")
    store.finish(SCOPE, {"outcome": "succeeded"}, token="c")
    assert not store.release(SCOPE, token="c")  # done: an outcome is never dropped


def test_a_claim_whose_lease_ran_out_is_settled_with_the_fix():
    clock = Clock()
    state = TimedStateStore(MemoryStateStore(clock), workers=2, timeout_s=5, shown="memory")
    store = RecordStore(state)
    runs = KeyedRuns(store, state, OutcomeJournal(None), lease_s=15)
    store.claim(SCOPE, "fp", token="a")
    clock.now += 14.9
    assert runs._settled_if_stale(SCOPE, store.get(SCOPE)).state == "running"
    clock.now += 0.2
    settled = runs._settled_if_stale(SCOPE, store.get(SCOPE))
    assert settled.outcome["outcome"] == "side_effect_unknown" and settled.stale
    assert "resolve" in settled.outcome["problem"]["detail"]
    store.close()
