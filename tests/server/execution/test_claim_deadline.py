"""A claim whose store call misses the state store's deadline (TimedStateStore `timeout_s`):
its caller got a 503 and never ran, but the claim may still land once the database answers.
It must not hold the key for good:

- a write's claim (KeyedRuns, POST /v1/tools/{name}/invoke) that lands late is released
  through the journal: the retry runs the handler, even past the claim's lease, where a
  claim left running would be settled `side_effect_unknown` until a person resolves it;
- a claim still queued at its deadline never runs: no record, nothing to release;
- an answer's claim (Replays, a chat request's Idempotency-Key) that lands late holds the
  key at most `abandoned_s` by the store's clock: after it, the retry is answered and kept.

The store runs on the test clock (tests/server/state/conftest.py); only the deadline itself
is wall time, kept short."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest

from server.errors import StateUnavailable
from server.execution import RecordStore, Scope, ToolPolicy, Tracing
from server.execution.journal import OutcomeJournal
from server.execution.keyed import KeyedRuns
from server.execution.replays import Replays
from server.execution.runner import Runner
from server.execution.service import ToolService
from server.identity import Caller
from server.sessions.sealing import Sealer
from server.state import MemoryStateStore
from server.state.timed import TimedStateStore
from server.wiring import load_contracts
from tests.server.execution.exec_contracts import LEDGER
from tests.server.state.conftest import Clock

DEADLINE_S = 0.2  # the state store's deadline: wall time, the one wait these tests make
LEASE_S = 15.0
BOUND_S = 10.0  # how long a test waits for a thread at most: a bound, not a speed
CALLER = Caller({"X-Tenant-Id": "acme"})
REFUND = {"order_id": "ORD-123", "amount": 5}


class LateClaims(MemoryStateStore):
    """A memory store on the test clock whose `create` (a claim) waits for `answer` once
    held: a database that takes the claim after its caller's deadline. `started`: the held
    claim is running on the store's thread."""

    def __init__(self, clock: Callable[[], float]) -> None:
        super().__init__(clock)
        self.holding = False
        self.started = threading.Event()
        self.answer = threading.Event()

    def hold_next_claim(self) -> None:
        self.holding, self.started, self.answer = True, threading.Event(), threading.Event()

    def create(self, namespace, key, value, *, ttl_s=None):
        if self.holding:
            self.holding = False
            self.started.set()
            self.answer.wait(BOUND_S)
        return super().create(namespace, key, value, ttl_s=ttl_s)


async def until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + BOUND_S
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


@pytest.fixture()
def invoking():
    """The invoke path as server/wiring.py builds it (KeyedRuns over a RecordStore, a
    ToolService), over a LateClaims store behind a TimedStateStore with a short deadline
    and one thread; the execution tests' contracts (refund_order counts its runs)."""
    LEDGER.clear()
    clock = Clock()
    inner = LateClaims(clock)
    state = TimedStateStore(inner, workers=1, timeout_s=DEADLINE_S, shown="memory")
    runs = KeyedRuns(RecordStore(state, owned=False), state, OutcomeJournal(None),
                     lease_s=LEASE_S)
    runner = Runner(lambda owner: None, workers_per_owner=2)
    tools = ToolService(load_contracts(["tests.server.execution.exec_contracts"]),
                        ToolPolicy(), runs=runs, runner=runner, tracing=Tracing())
    yield tools, runs, inner, clock
    inner.answer.set()
    runner.pools.shutdown()
    state.close()


def test_a_claim_that_lands_after_its_deadline_is_released_and_the_retry_runs(invoking):
    tools, runs, inner, clock = invoking
    scope = Scope("acme", "refund_order", "idem-late-1")

    async def scenario() -> None:
        inner.hold_next_claim()
        with pytest.raises(StateUnavailable, match="did not answer within"):
            await tools.invoke("refund_order", REFUND, scope.key, CALLER)
        assert inner.started.is_set() and LEDGER["refund"] == 0  # claimed late, never ran
        inner.answer.set()  # the database answers: the claim lands, nobody holds it
        await until(lambda: runs.journal.waiting() == 1, "the late claim's release")
        landed = runs.store.get(scope)
        assert landed is not None and landed.state == "running"
        # Past the lease: a claim left running would now be settled side_effect_unknown,
        # and the key refused until a person resolves it.
        clock.now += 4 * LEASE_S
        assert await runs.replay() == 1  # the journal loop's round (server/background.py)
        assert runs.store.get(scope) is None and runs.journal.waiting() == 0
        retry = await tools.invoke("refund_order", REFUND, scope.key, CALLER)
        assert retry.status == 200, retry.body
        assert (retry.body["outcome"], retry.body["replayed"]) == ("succeeded", False)
        assert LEDGER["refund"] == 1  # the handler ran once: for the retry
        again = await tools.invoke("refund_order", REFUND, scope.key, CALLER)
        assert again.body["replayed"] and again.body["result"] == retry.body["result"]
    asyncio.run(scenario())


def test_a_claim_still_queued_at_its_deadline_never_runs_and_the_retry_runs(invoking):
    """The store's one thread is held by another claim past this one's deadline: this one is
    taken back unrun, so no record of it lands and only the held claim is released."""
    tools, runs, inner, _ = invoking
    held = Scope("acme", "refund_order", "idem-late-held")
    scope = Scope("acme", "refund_order", "idem-late-2")

    async def scenario() -> None:
        inner.hold_next_claim()
        with pytest.raises(StateUnavailable):
            await runs.claim(held, "fp")  # its create holds the store's one thread
        assert inner.started.is_set()
        with pytest.raises(StateUnavailable, match="did not answer within"):
            await runs.claim(scope, "fp")  # queued behind it past its deadline
        inner.answer.set()
        await until(lambda: runs.state.busy() == 0 and runs.journal.waiting() == 1,
                    "the held claim's release, and nothing else")
        assert [e.scope for e in runs.journal.pending()] == [held]
        assert runs.store.get(scope) is None  # it never ran: nothing to release
        retry = await tools.invoke("refund_order", REFUND, scope.key, CALLER)
        assert (retry.body["outcome"], retry.body["replayed"]) == ("succeeded", False)
        assert LEDGER["refund"] == 1
    asyncio.run(scenario())


def test_an_answers_claim_that_lands_after_its_deadline_holds_the_key_only_abandoned_s():
    """A chat request's Idempotency-Key (server/execution/replays.py): its claim missed the
    store's deadline (the client got a 503) and landed later, for no request. The key is
    free again once `abandoned_s` has passed on the store's clock: the retry is answered,
    and its answer kept for the next."""
    clock = Clock()
    inner = LateClaims(clock)
    state = TimedStateStore(inner, workers=2, timeout_s=DEADLINE_S, shown="memory")
    replays = Replays(RecordStore(state, owned=False), Sealer(None), abandoned_s=300.0)
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    answered: list[int] = []

    async def run() -> dict:
        answered.append(1)
        return {"id": f"chatcmpl-{len(answered)}"}

    def answer() -> object:
        return replays.answer("chat-late-1", route="/v1/chat/completions", owner="acme",
                              body=body, streams=False, headers={}, run=run)

    async def scenario() -> None:
        inner.hold_next_claim()
        with pytest.raises(StateUnavailable, match="did not answer within"):
            await answer()
        assert inner.started.is_set() and answered == []
        inner.answer.set()
        scope = Scope("acme", "answer:/v1/chat/completions", "chat-late-1")
        await until(lambda: inner.get("idempotency", scope.id()) is not None,
                    "the late claim to land")
        clock.now += 300.0 + 1
        first = await answer()
        assert first == {"id": "chatcmpl-1"} and answered == [1]
        assert await answer() == first and answered == [1]  # kept: replayed, not run
    try:
        asyncio.run(scenario())
    finally:
        inner.answer.set()
        state.close()
