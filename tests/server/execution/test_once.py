"""A write runs once per key and its outcome is never lost, in process: a sync handler
past its time limit keeps its key running and its real outcome is kept when it ends;
`resolve` refuses a key whose run still holds its lease; a late finish of a run whose key
was settled and run again is refused and audited; a full handler pool and a refused
connection run nothing and store nothing (the key may run again); keys without a tenant
each have their own scope; an outcome the store does not take is journaled and applied."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from server.execution import RecordStore, Scope
from server.execution.journal import OutcomeJournal
from server.execution.keyed import Claim, KeyedRuns
from server.execution.runner import Execution
from server.identity import KeyRing
from server.state import MemoryStateStore, StateError
from server.state.timed import TimedStateStore
from tests.scripted import assert_problem
from tests.server.execution.conftest import audit, who
from tests.server.execution.exec_contracts import LEDGER, STUCK

ADMIN = who("acme", "admin")


@pytest.fixture(autouse=True)
def stuck():
    STUCK.clear()
    yield
    STUCK.set()  # no thread of a test outlives it


def invoke(client, tool, arguments, key, headers=ADMIN):
    return client.post(f"/v1/tools/{tool}/invoke", headers=headers,
                       json={"arguments": arguments, "idempotency_key": key})


def until(check, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def test_a_sync_write_past_its_limit_keeps_its_key_until_its_real_outcome_is_kept(
        client, audit_path):
    first = invoke(client, "stuck_write", {"entry": "e1"}, "idem-stuck-1").json()
    assert first["outcome"] == "side_effect_unknown"
    assert "still running" in first["problem"]["detail"]
    assert_problem(invoke(client, "stuck_write", {"entry": "e1"}, "idem-stuck-1"), 409,
                   says="is running")
    resolve = client.post("/v1/tools/stuck_write/executions/idem-stuck-1/resolve",
                          json={"outcome": "failed", "note": "looks undone"}, headers=ADMIN)
    assert_problem(resolve, 409, says="renews its lease")
    assert resolve.json()["error"]["code"] == "execution_running"
    assert int(resolve.headers["Retry-After"]) >= 1
    STUCK.set()
    until(lambda: any(r["event"] == "executed_late" for r in audit(audit_path)))
    again = invoke(client, "stuck_write", {"entry": "e1"}, "idem-stuck-1").json()
    assert (again["outcome"], again["replayed"]) == ("succeeded", True)
    assert again["result"] == {"entry": "e1", "key": "idem-stuck-1"}
    assert LEDGER["stuck_started"] == 1  # ran once, however often it was asked


def test_a_late_finish_of_a_superseded_run_is_refused_and_audited(client, audit_path):
    invoke(client, "stuck_write", {"entry": "e2"}, "idem-stuck-2")
    runs: KeyedRuns = client.app.state.tools.runs
    scope = Scope("acme", "stuck_write", "idem-stuck-2")
    # An operator settles it behind the server's back and another run finishes the key.
    assert runs.store.forget(scope)
    assert runs.store.claim(scope, "fp", token="another-run") is None
    assert runs.store.finish(scope, {"outcome": "succeeded", "result": "B"},
                             token="another-run")
    STUCK.set()
    until(lambda: any(r["event"] == "late_finish_refused" for r in audit(audit_path)))
    (refused,) = [r for r in audit(audit_path) if r["event"] == "late_finish_refused"]
    assert refused["idempotency_key"] == "idem-stuck-2" and refused["outcome"] == "succeeded"
    assert runs.store.get(scope).outcome["result"] == "B"  # the newer run's, untouched


def test_a_full_handler_pool_runs_nothing_and_stores_nothing(app_client):
    with app_client(handler_workers=2) as client:
        for n in (1, 2):
            assert invoke(client, "stuck_write", {"entry": "x"}, f"idem-pool-{n}").json()[
                "outcome"] == "side_effect_unknown"
        refused = invoke(client, "stuck_write", {"entry": "x"}, "idem-pool-3").json()
        assert refused["outcome"] == "failed" and refused["problem"]["retryable"]
        assert "did not run" in refused["problem"]["detail"]
        assert LEDGER["stuck_started"] == 2
        STUCK.set()
        until(lambda: LEDGER["stuck_done"] == 2)
        until(lambda: invoke(client, "stuck_write", {"entry": "x"}, "idem-pool-1").status_code
              == 200)
        ran = invoke(client, "stuck_write", {"entry": "x"}, "idem-pool-3").json()
        assert (ran["outcome"], ran["replayed"]) == ("succeeded", False)  # it may run again
        assert LEDGER["stuck_started"] == 3


def test_a_write_whose_endpoint_refuses_the_connection_is_not_stored(client):
    for _ in range(2):
        body = invoke(client, "notify_partner", {"order_id": "ORD-123"}, "idem-notify-1").json()
        assert body["outcome"] == "failed" and body["problem"]["retryable"]
        assert not body["replayed"]  # tried again, not replayed: nothing was sent either time
    runs: KeyedRuns = client.app.state.tools.runs
    assert runs.store.get(Scope("acme", "notify_partner", "idem-notify-1")) is None


def test_keys_without_a_tenant_never_share_an_idempotency_scope(app_client):
    """Two API keys without a tenant, one key string: each runs its own write; neither
    gets the other's result as a replay."""
    first, second = "sk-first-0123456789abcdef", "sk-second-0123456789abcde"
    keys = KeyRing.of([{"key": first, "name": "first", "roles": ["admin"]},
                       {"key": second, "name": "second", "roles": ["admin"]}])
    with app_client(keys=keys) as client:
        bodies = [invoke(client, "email_customers", {"customers": ["a", "b"]},
                         "idem-shared-1", headers={"Authorization": f"Bearer {key}"}).json()
                  for key in (first, second, first)]
    assert [b.get("replayed") for b in bodies] == [False, False, True], bodies
    assert LEDGER["bulk"] == 2  # one run per API key


class FailingPuts(MemoryStateStore):
    """A store whose writes fail while `down` (a database that went away)."""

    down = False

    def put(self, *args, **kwargs):
        if self.down:
            raise StateError("the state database: connection refused")
        return super().put(*args, **kwargs)


def test_an_outcome_the_store_does_not_take_is_journaled_and_applied_later(tmp_path):
    inner = FailingPuts()
    state = TimedStateStore(inner, workers=2, timeout_s=2, shown="test")
    store = RecordStore(state, owned=False)
    path = tmp_path / "outcomes.journal"
    runs = KeyedRuns(store, state, OutcomeJournal(path))
    scope = Scope("acme", "refund_order", "idem-j-1")

    async def scenario() -> None:
        claim = await runs.claim(scope, "fp")
        assert isinstance(claim, Claim)
        inner.down = True
        await runs.keep(claim, Execution("succeeded", {"refund": 1}))  # never raises
        assert store.get(scope).state == "running" and runs.journal.waiting() == 1
        assert await runs.replay() == 0  # still down: kept
        inner.down = False
        # A restart reads the file back: the outcome is not only in memory.
        again = KeyedRuns(store, state, OutcomeJournal(path))
        assert await again.replay() == 1
    asyncio.run(scenario())
    assert store.get(scope).outcome == {"outcome": "succeeded", "result": {"refund": 1},
                                        "problem": None, "attempts": 0, "seconds": 0.0}
    assert OutcomeJournal(path).waiting() == 0
    state.close()



def test_a_torn_last_line_is_cut_so_the_next_entry_survives(tmp_path):
    """The process died while writing a line: on open it is cut, so the next entry is a
    line of its own and is still there at the restart after."""
    from server.execution.journal import Entry

    path = tmp_path / "outcomes.journal"
    scope = Scope("acme", "refund_order", "idem-t-1")
    first = OutcomeJournal(path)
    first.add(Entry("finish", scope, "tok-1", {"outcome": "succeeded"}))
    with path.open("a") as f:
        f.write('{"id":"torn","op":"fini')  # no newline: the write was cut
    reopened = OutcomeJournal(path)
    assert path.read_text().endswith("\n") and "torn" not in path.read_text()
    reopened.add(Entry("finish", Scope("acme", "refund_order", "idem-t-2"), "tok-2",
                       {"outcome": "succeeded"}))
    assert sorted(e.token for e in OutcomeJournal(path).pending()) == ["tok-1", "tok-2"]


def test_an_outcome_being_stored_when_the_task_is_cancelled_is_journaled(tmp_path):
    inner = FailingPuts()
    state = TimedStateStore(inner, workers=2, timeout_s=2, shown="test")
    store = RecordStore(state, owned=False)
    path = tmp_path / "outcomes.journal"
    runs = KeyedRuns(store, state, OutcomeJournal(path))
    scope = Scope("acme", "refund_order", "idem-c-1")

    async def scenario() -> None:
        claim = await runs.claim(scope, "fp")
        inner.down = True  # the store retries with backoff...
        keeping = asyncio.ensure_future(runs.keep(claim, Execution("succeeded", {"r": 1})))
        await asyncio.sleep(0.05)
        keeping.cancel()  # ...and the server stops meanwhile
        with contextlib.suppress(asyncio.CancelledError):
            await keeping
    asyncio.run(scenario())
    assert [e.token for e in OutcomeJournal(path).pending()] != []
    state.close()
