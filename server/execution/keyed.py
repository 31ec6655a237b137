"""`KeyedRuns`: a write runs once per idempotency key, and its outcome is never lost.

- `claim`: the key for one run, with a fencing token (server/execution/store.py). A claim
  that failed or timed out on the store may still have landed: it is released (through
  the journal) once it is known, since its run never started.
- `Lease`: renewed while the run goes on, so another replica does not settle a live run
  as lost, and `resolve` refuses it (409).
- `keep`: the outcome of a run that acted (or may have) is stored, tried again a few
  times, else written to the local journal (server/execution/journal.py) and applied by
  `replay` once the store answers: the client gets its outcome and the audit log its line
  either way. A failure known not to have acted, that a retry may get past (nothing was
  sent, the endpoint said 429, the handler's pool was full) is not stored: the claim is
  released and the key may run again.
- A late finish of a run whose key was resolved (and maybe run again) meanwhile is refused
  by the store and reported through `on_refused` (the audit log)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from server.errors import SIDE_EFFECT_UNKNOWN, StateUnavailable
from server.execution.journal import Entry, OutcomeJournal
from server.execution.runner import Execution, problem
from server.execution.store import RecordStore, Scope, Stored
from server.state.timed import TimedStateStore

log = logging.getLogger("strictcall.execution")
STORE_TRIES = 3  # an outcome is offered to the store this often before it is journaled
STORE_BACKOFF_S = 0.2
DEFAULT_LEASE_S = 15.0


@dataclass(frozen=True)
class Claim:
    """This run's hold on a key: the token every later change of its record names."""

    scope: Scope
    token: str


def kept(done: Execution) -> bool:
    """Whether a write's outcome is stored for its key: not when it failed without acting
    and a retry may get past it (it may run again with the same key)."""
    return not (done.outcome == "failed" and bool((done.problem or {}).get("retryable")))


class KeyedRuns:
    def __init__(self, store: RecordStore, state: TimedStateStore, journal: OutcomeJournal,
                 *, lease_s: float = DEFAULT_LEASE_S,
                 on_refused: Callable[[Entry, Stored | None], None] = lambda e, s: None
                 ) -> None:
        self.store, self.state, self.journal = store, state, journal
        self.lease_s = lease_s
        self.on_refused = on_refused  # a late finish the store refused: for the audit
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- claiming --------------------------------------------------------------------------
    async def claim(self, scope: Scope, fingerprint: str) -> Claim | Stored:
        """This run's claim, or the record already there (the caller replays or refuses)."""
        token = uuid.uuid4().hex

        def attempt() -> Stored | None:
            try:
                return self.store.claim(scope, fingerprint, token=token)
            except StateUnavailable:  # it may have landed: undo it once the store answers
                self.journal.add(Entry("release", scope, token))
                raise

        def abandoned(future: concurrent.futures.Future[Stored | None]) -> None:
            if not future.cancelled() and future.exception() is None \
                    and future.result() is None:  # won, but nobody will run it
                self.journal.add(Entry("release", scope, token))

        found = await self.state.run(attempt, abandoned=abandoned)
        if found is not None:
            found = await self.state.run(self._settled_if_stale, scope, found)
            return found
        return Claim(scope, token)

    def _settled_if_stale(self, scope: Scope, found: Stored) -> Stored:
        """A running record whose lease ran out: its replica stopped answering mid-call."""
        if found.state != "running":
            return found
        lost = Execution("side_effect_unknown", problem=problem(
            SIDE_EFFECT_UNKNOWN,
            f"the write {scope.tool!r} was still running when the server running it stopped "
            "answering; it may have acted, so it will not run again with this idempotency "
            "key until someone checks the system it writes to and resolves the key "
            "(POST /v1/tools/{name}/executions/{key}/resolve)", owner=True))
        return self.store.settle_stale(scope, older_than_s=self.lease_s,
                                       outcome=lost.as_dict()) or found

    # -- while it runs -----------------------------------------------------------------------
    def lease(self, claim: Claim) -> asyncio.Task[None]:
        """Renew `claim`'s lease until the task is cancelled."""
        return self._spawn(self._renew(claim))

    async def _renew(self, claim: Claim) -> None:
        while True:
            await asyncio.sleep(self.lease_s / 3)
            try:
                ours = await self.state.run(self.store.renew, claim.scope, token=claim.token)
            except StateUnavailable as exc:
                log.warning("could not renew the lease of %r: %s", claim.scope.key, exc.detail)
                continue
            if not ours:
                log.warning("the key %r of %r was resolved while its run goes on",
                            claim.scope.key, claim.scope.tool)
                return

    # -- the outcome -------------------------------------------------------------------------
    async def keep(self, claim: Claim, done: Execution) -> None:
        """Store `done` for `claim` (or release the claim when it is not kept); never
        raises: what the store does not take in time goes to the journal."""
        entry = Entry("finish", claim.scope, claim.token, done.as_dict()) if kept(done) \
            else Entry("release", claim.scope, claim.token)
        try:
            for attempt in range(STORE_TRIES):
                try:
                    await self.state.run(self._apply, entry)
                    return
                except StateUnavailable as exc:
                    if attempt + 1 == STORE_TRIES:
                        log.warning("the state store did not take the outcome of %r (%s): "
                                    "journaled, applied once it answers", claim.scope.key,
                                    exc.detail)
                    else:
                        await asyncio.sleep(STORE_BACKOFF_S * (attempt + 1))
        except asyncio.CancelledError:
            # Cancelled while the store was being tried (the server stopping): journaled
            # here, on the loop, since the task is ending; applying it twice is harmless.
            self._journal(entry)
            raise
        await asyncio.to_thread(self._journal, entry)  # its fsync off the event loop

    def keep_later(self, claim: Claim, work: Coroutine[Any, Any, Execution],
                   then: Callable[[Execution], None]) -> None:
        """A run that goes on after its caller was answered (a handler thread past its
        time limit): its lease is renewed until it ends, then its outcome kept."""
        async def wait() -> None:
            lease = self.lease(claim)
            try:
                done = await work
            finally:
                lease.cancel()
            await self.keep(claim, done)
            then(done)
        self._spawn(wait())

    def _journal(self, entry: Entry) -> None:
        try:
            self.journal.add(entry)
        except OSError as exc:  # the outcome is in the response and the audit log only
            log.error("could not journal the outcome of %r: %s", entry.scope.key, exc)

    def _apply(self, entry: Entry) -> None:
        """On the state pool: one journal entry, applied (or known to be moot)."""
        if entry.op == "release":
            self.store.release(entry.scope, token=entry.token)
            return
        assert entry.outcome is not None
        if self.store.finish(entry.scope, entry.outcome, token=entry.token):
            return
        found = self.store.get(entry.scope)
        if found is not None and found.token == entry.token and found.state == "done" \
                and not found.stale:
            return  # the same outcome landed already (a call that outlived its deadline)
        self.on_refused(entry, found)

    async def replay(self) -> int:
        """Apply what the journal holds; the number applied."""
        applied = 0
        for entry in self.journal.pending():
            try:
                await self.state.run(self._apply, entry)
            except StateUnavailable:
                break  # still down: the next round
            await asyncio.to_thread(self.journal.done, entry)
            applied += 1
        return applied

    async def replay_forever(self, every_s: float = 1.0) -> None:
        while True:
            if self.journal.waiting():
                applied = await self.replay()
                if applied:
                    log.info("applied %d journaled outcome(s) to the state store", applied)
            await asyncio.sleep(every_s)

    def _spawn(self, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)  # held until done: a task nobody holds may be collected
        task.add_done_callback(self._tasks.discard)
        return task

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
