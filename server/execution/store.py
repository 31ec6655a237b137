"""Idempotency keys and the outcomes they lead to, so a repeated write returns its first
outcome instead of acting twice. `IdempotencyStore` is the interface; `RecordStore` keeps
the keys as records of the state store (server/state, `--state-url`, namespace
"idempotency"): SQLite by default, so a restart remembers, Postgres where replicas share
them, memory for tests (`SqliteStore`, `MemoryStore`).

A key is scoped by tenant and tool: two tenants may use the same key string. A record is
`running` from the moment a call is claimed until its outcome is stored; a claim that
finds a record gets it back instead (the caller replays its outcome, or refuses to run
while it is running or needs resolving). The claim is the state store's `create`: one
atomic step that a second replica cannot also win. A record left `running` longer than
its call could run (its replica died mid-call) is settled as `side_effect_unknown`: it
may have acted, so it is never run again until someone resolves it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from server.state import MemoryStateStore, Record, StateStore, VersionConflict

State = Literal["running", "done"]
NAMESPACE = "idempotency"


@dataclass(frozen=True)
class Scope:
    tenant: str | None
    tool: str
    key: str

    def id(self) -> str:
        return "\x1f".join((self.tenant or "", self.tool, self.key))


@dataclass(frozen=True)
class Stored:
    """A key's record: the arguments' fingerprint it was claimed with, its state, and once
    done, the normalized outcome (server.execution.runner.Execution.as_dict())."""

    fingerprint: str
    state: State
    outcome: dict[str, Any] | None
    updated: float


class IdempotencyStore(ABC):
    @abstractmethod
    def claim(self, scope: Scope, fingerprint: str) -> Stored | None:
        """Atomically: record `scope` as running and return None, or, if it is already
        recorded, change nothing and return its record."""

    @abstractmethod
    def finish(self, scope: Scope, outcome: dict[str, Any]) -> None:
        """Store the outcome of a claimed call (done)."""

    @abstractmethod
    def get(self, scope: Scope) -> Stored | None:
        """The record of `scope`, if any (claims nothing)."""

    @abstractmethod
    def forget(self, scope: Scope) -> bool:
        """Drop a record (a call resolved as never having acted may run again)."""

    @abstractmethod
    def settle_stale(self, scope: Scope, *, older_than_s: float,
                     outcome: dict[str, Any]) -> Stored | None:
        """If `scope` is still running, claimed more than `older_than_s` ago by the
        store's clock, store `outcome` for it (done) and return the record; else None."""

    def close(self) -> None:  # noqa: B027 - an optional hook: the memory store holds nothing
        """Release what the store holds."""


class RecordStore(IdempotencyStore):
    """Idempotency records in a `StateStore`; every change after the claim is a
    compare-and-set on the record's version, so a late finish and a settle on another
    replica cannot overwrite each other unseen."""

    def __init__(self, records: StateStore, *, owned: bool = True) -> None:
        self.records = records
        self._owned = owned  # close the state store with this one

    def claim(self, scope: Scope, fingerprint: str) -> Stored | None:
        found = self.records.create(NAMESPACE, scope.id(), {
            "fingerprint": fingerprint, "state": "running", "outcome": None})
        return None if found is None else _stored(found)

    def finish(self, scope: Scope, outcome: dict[str, Any]) -> None:
        self._settle(scope, outcome, only_if=None)

    def get(self, scope: Scope) -> Stored | None:
        found = self.records.get(NAMESPACE, scope.id())
        return None if found is None else _stored(found)

    def forget(self, scope: Scope) -> bool:
        return self.records.delete(NAMESPACE, scope.id())

    def settle_stale(self, scope: Scope, *, older_than_s: float,
                     outcome: dict[str, Any]) -> Stored | None:
        return self._settle(scope, outcome, only_if=older_than_s)

    def _settle(self, scope: Scope, outcome: dict[str, Any], *,
                only_if: float | None) -> Stored | None:
        """Store `outcome` (done); with `only_if`, only for a record running that long."""
        while True:
            found = self.records.get(NAMESPACE, scope.id())
            if found is None:  # resolved (forgotten) meanwhile: nothing left to settle
                return None
            if only_if is not None and (found.value["state"] != "running"
                                        or self.records.now() - found.updated < only_if):
                return None
            value = {**found.value, "state": "done", "outcome": outcome}
            try:
                return _stored(self.records.put(NAMESPACE, scope.id(), value,
                                                version=found.version))
            except VersionConflict:  # another replica changed it first: look again
                continue

    def close(self) -> None:
        if self._owned:
            self.records.close()


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
    return Stored(str(value["fingerprint"]), value["state"], value.get("outcome"),
                  record.updated)
