"""Idempotency keys and the outcomes they lead to, so a repeated write returns its first
outcome instead of acting twice: records of the state store (server/state, `--state-url`,
namespace "idempotency"): SQLite by default, so a restart remembers, Postgres where
replicas share them, memory for tests (`SqliteStore`, `MemoryStore`).

A key is scoped by its owner (the API key's tenant, else the API key itself) and tool: two
owners may use the same key string. A record is `running` from the moment a call is
claimed until its outcome is stored; a claim that finds a record gets it back instead (the
caller replays its outcome, or refuses to run while it is running or needs resolving). The
claim is the state store's `create`: one atomic step that a second replica cannot also win.

Fencing: a claim carries a token, a value only the run that claimed knows. Every later
change of the record by that run (renewing its lease, storing its outcome, releasing a
claim that never ran) names the token and is a compare-and-set on the record's version: a
run whose key was resolved meanwhile (and maybe claimed again by another run) finds
another token and is refused, so a late finish never overwrites a newer run's record. A
running record's lease is renewed while its run goes on; one whose lease ran out (its
replica died mid-call) is settled as `side_effect_unknown`: it may have acted, so it is
never run again until someone resolves it. The run's own outcome, if it still comes,
replaces that settlement (the same token: the truth about the same run); an operator's
resolution does not give way to it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from server.state import MemoryStateStore, Record, StateStore, VersionConflict

State = Literal["running", "done"]
NAMESPACE = "idempotency"
# Stripe keeps idempotency keys 24 hours; so do we by default (--idempotency-ttl-s).
DEFAULT_TTL_S = 24 * 3600.0


@dataclass(frozen=True)
class Scope:
    owner: str | None  # the tenant, or "key:<name>" for an API key without one
    tool: str
    key: str

    def id(self) -> str:
        return "\x1f".join((self.owner or "", self.tool, self.key))

    def as_dict(self) -> dict[str, Any]:
        return {"owner": self.owner, "tool": self.tool, "key": self.key}

    @classmethod
    def of(cls, raw: dict[str, Any]) -> Scope:
        return cls(raw.get("owner"), str(raw["tool"]), str(raw["key"]))


@dataclass(frozen=True)
class Stored:
    """A key's record: the arguments' fingerprint it was claimed with, its state, once done
    the normalized outcome (server.execution.runner.Execution.as_dict()), the claim's
    token, and whether it was settled for a run that stopped answering (`stale`) or by a
    person (`resolved`)."""

    fingerprint: str
    state: State
    outcome: dict[str, Any] | None
    updated: float
    token: str | None = None
    version: int = 0
    stale: bool = False
    resolved: bool = False


class RecordStore:
    """Idempotency records in a `StateStore`; every change after the claim is a
    compare-and-set on the record's version."""

    def __init__(self, records: StateStore, *, owned: bool = True,
                 ttl_s: float = DEFAULT_TTL_S) -> None:
        self.records = records
        self.ttl_s = ttl_s  # how long a key is remembered after its last change
        self._owned = owned  # close the state store with this one

    def claim(self, scope: Scope, fingerprint: str, *, token: str = "") -> Stored | None:
        """Atomically: record `scope` as running for the run holding `token` and return
        None, or, if it is already recorded, change nothing and return its record."""
        found = self.records.create(NAMESPACE, scope.id(), {
            "fingerprint": fingerprint, "state": "running", "outcome": None, "token": token},
            ttl_s=self.ttl_s)
        return None if found is None else _stored(found)

    def get(self, scope: Scope) -> Stored | None:
        found = self.records.get(NAMESPACE, scope.id())
        return None if found is None else _stored(found)

    def finish(self, scope: Scope, outcome: dict[str, Any], *, token: str = "") -> bool:
        """Store the outcome of the run holding `token`; False (nothing changed) when the
        record is no longer that run's: resolved, forgotten or claimed by another run."""
        return self._change(scope, token, lambda found: found.state == "running" or (
            found.stale and not found.resolved), {"state": "done", "outcome": outcome,
                                                  "stale": False}) \
            is not None

    def renew(self, scope: Scope, *, token: str) -> bool:
        """Push the running claim's lease on (its `updated` time is the store's now)."""
        return self._change(scope, token, lambda found: found.state == "running", {}) \
            is not None

    def release(self, scope: Scope, *, token: str) -> bool:
        """Drop the claim of a run that never started its handler, so the key can run
        again; False when the record is not that run's running claim."""
        while True:
            found = self.get(scope)
            if found is None or found.token != token or found.state != "running":
                return False
            if self.records.delete(NAMESPACE, scope.id(), version=found.version):
                return True

    def settle_stale(self, scope: Scope, *, older_than_s: float,
                     outcome: dict[str, Any]) -> Stored | None:
        """If `scope` is still running and its lease was last renewed more than
        `older_than_s` ago by the store's clock, store `outcome` for it (done, stale) and
        return the record; else None."""
        while True:
            found = self.get(scope)
            if found is None or found.state != "running" \
                    or self.records.now() - found.updated < older_than_s:
                return None
            value = {**self._value(found), "state": "done", "outcome": outcome, "stale": True}
            try:
                return _stored(self.records.put(NAMESPACE, scope.id(), value,
                                                version=found.version, ttl_s=self.ttl_s))
            except VersionConflict:
                continue

    def resolve(self, scope: Scope, outcome: dict[str, Any] | None, *,
                version: int) -> bool:
        """A person's settlement of the record they saw at `version`: None forgets it
        (it never acted: the key may run again), else stores `outcome` as resolved. False
        when the record changed since it was read."""
        if outcome is None:
            return self.records.delete(NAMESPACE, scope.id(), version=version)
        found = self.get(scope)
        if found is None or found.version != version:
            return False
        value = {**self._value(found), "state": "done", "outcome": outcome, "resolved": True,
                 "token": None}
        try:
            self.records.put(NAMESPACE, scope.id(), value, version=version, ttl_s=self.ttl_s)
        except VersionConflict:
            return False
        return True

    def forget(self, scope: Scope) -> bool:
        """Drop a record whatever it holds (tests, and tools an operator runs)."""
        return self.records.delete(NAMESPACE, scope.id())

    def now(self) -> float:
        return self.records.now()

    def close(self) -> None:
        if self._owned:
            self.records.close()

    def _change(self, scope: Scope, token: str, allowed: Callable[[Stored], bool],
                changes: dict[str, Any]) -> Stored | None:
        """Apply `changes` to the record if it is still the run's with `token` and
        `allowed` says so; None when it is not."""
        while True:
            found = self.get(scope)
            if found is None or found.token != token or not allowed(found):
                return None
            try:
                return _stored(self.records.put(NAMESPACE, scope.id(), {
                    **self._value(found), **changes}, version=found.version,
                    ttl_s=self.ttl_s))
            except VersionConflict:  # another replica changed it first: look again
                continue

    @staticmethod
    def _value(found: Stored) -> dict[str, Any]:
        value: dict[str, Any] = {"fingerprint": found.fingerprint, "state": found.state,
                                 "outcome": found.outcome, "token": found.token}
        if found.stale:
            value["stale"] = True
        if found.resolved:
            value["resolved"] = True
        return value


IdempotencyStore = RecordStore  # the name it had when it was an interface


class SqliteStore(RecordStore):
    """The records in one SQLite file (server/state/sqlite.py)."""

    def __init__(self, path: Path) -> None:
        from server.state.sqlite import SqliteStateStore

        super().__init__(SqliteStateStore(path))
        self.path = path


class MemoryStore(RecordStore):
    """The same contract in a dict: for tests, and servers that need no restart memory."""

    def __init__(self) -> None:
        super().__init__(MemoryStateStore())


def _stored(record: Record) -> Stored:
    value = record.value
    token = value.get("token")
    return Stored(str(value["fingerprint"]), value["state"], value.get("outcome"),
                  record.updated, None if token is None else str(token), record.version,
                  bool(value.get("stale")), bool(value.get("resolved")))
