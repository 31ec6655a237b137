"""`SessionStore`: sessions' slots as records of the state store (server/state,
`--state-url`, namespace "sessions"): SQLite by default, Postgres where replicas share
them, so a conversation begun on one replica goes on on another. A session is scoped by the
caller's tenant: the record's key starts with it, so an API key never reads or writes
another tenant's session, whatever id it sends.

Every write is a compare-and-set on the record's version (`StateStore.put(version=...)`):
two turns of one session on two replicas at once cannot overwrite each other unseen; the
later one applies its change to what the earlier one wrote.

A contract's `Redact()` fields are never stored in clear: their values (and changes
waiting for confirmation) are sealed in the record (server/sessions/sealing.py), opened
when a turn loads them, and GET /v1/sessions/{id} shows them as "[redacted]".

The store's clock (`now`) is the database's, read alongside a load (off the event loop)
and kept as an offset from this host's clock: asking it costs no round trip, so it can be
asked on the event loop."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from contracts import Contract
from contracts.redaction import REDACTED
from server.identity import Identity
from server.sessions.sealing import Sealer, is_sealed
from server.sessions.session import Change, SessionState
from server.state import StateStore, VersionConflict

NAMESPACE = "sessions"
# A session record outlives its slots by this factor of the slot TTL, so a turn after the
# slots expired can still say which ones did (then the record goes).
RECORD_TTL_FACTOR = 2
_CAS_TRIES = 8
CLOCK_CHECK_S = 60.0  # how often the store's clock is read again
_DROPPED = object()  # a secret value with no sealer, or sealed under another key


def scope_of(identity: Identity | None) -> str:
    """Whose sessions and stored responses these are: the key's tenant (a key without one:
    the key itself). Without API keys everyone shares one scope, as everyone may call."""
    if identity is None:
        return ""
    return f"tenant:{identity.tenant}" if identity.tenant is not None \
        else f"key:{identity.name}"


@dataclass(frozen=True)
class Loaded:
    state: SessionState
    version: int | None  # None: no record yet


class SessionStore:
    def __init__(self, records: StateStore, *, slot_ttl_s: float,
                 clock: Callable[[], float] | None = None,
                 contract_of: Callable[[str], Contract | None] = lambda tool: None,
                 sealer: Sealer | None = None) -> None:
        self.records = records
        self.slot_ttl_s = slot_ttl_s
        # The store's clock by default: replicas compare ages with one clock, not their own.
        self.clock = clock or self._store_clock
        self._offset: float | None = None  # the store's clock minus this host's
        self._offset_at = 0.0
        self._contract = contract_of  # a tool's contract, for its Redact() fields
        self._sealer = sealer
        if clock is None:
            self._learn_clock()  # at startup; then alongside loads, off the event loop

    def now(self) -> float:
        return self.clock()

    def _store_clock(self) -> float:
        return time.time() + (self._offset or 0.0)

    def _learn_clock(self) -> None:
        """Off the event loop, now and then: the store's clock against this host's."""
        if self._offset is None or time.monotonic() - self._offset_at > CLOCK_CHECK_S:
            self._offset = self.records.now() - time.time()
            self._offset_at = time.monotonic()

    def load(self, scope: str, session: str) -> Loaded:
        found = self.records.get(NAMESPACE, _key(scope, session))
        if self.clock == self._store_clock:
            self._learn_clock()
        if found is None:
            return Loaded(SessionState(), None)
        return Loaded(self._opened(SessionState.of(found.value)), found.version)

    def kept(self, state: SessionState) -> SessionState:
        """`state` as it is stored: each tool's Redact() values sealed (left out where
        nothing can seal them)."""
        return self._each_secret(state, self._seal)

    def shown(self, state: SessionState) -> SessionState:
        """`state` as GET /v1/sessions/{id} shows it: Redact() values "[redacted]"."""
        return self._each_secret(state, lambda value: REDACTED)

    def _each_secret(self, state: SessionState, change: Callable[[Any], Any]
                     ) -> SessionState:
        tools = dict(state.tools)
        for name, slots in state.tools.items():
            contract = self._contract(name)
            if contract is None or not contract.redacted:
                continue
            secret = {k for k, v in slots.values.items() if contract.redact(v, at=f"/{k}") != v}
            secret |= {c.name for c in slots.pending
                       if contract.redact(c.new, at=c.field) != c.new
                       or contract.redact(c.old, at=c.field) != c.old}
            if not secret:
                continue
            values = {k: change(v) if k in secret else v for k, v in slots.values.items()}
            pending = tuple(Change(c.field, change(c.old), change(c.new)) if c.name in secret
                            else c for c in slots.pending)
            tools[name] = replace(slots, values={k: v for k, v in values.items()
                                                 if v is not _DROPPED},
                                  pending=tuple(c for c in pending if c.new is not _DROPPED))
        return replace(state, tools=tools)

    def _seal(self, value: Any) -> Any:
        return _DROPPED if self._sealer is None else self._sealer.seal(value)

    def _opened(self, state: SessionState) -> SessionState:
        """Sealed values opened; one sealed under another key (another process's own
        secret) is dropped, as if never filled."""
        if self._sealer is None:
            return state
        sealer = self._sealer

        def opened(value: Any) -> Any:
            if not is_sealed(value):
                return value
            ok, clear = sealer.open(value)
            return clear if ok else _DROPPED

        tools = {}
        for name, slots in state.tools.items():
            values = {k: opened(v) for k, v in slots.values.items()}
            pending = tuple(Change(c.field, opened(c.old), opened(c.new))
                            for c in slots.pending)
            tools[name] = replace(slots, values={k: v for k, v in values.items()
                                                 if v is not _DROPPED},
                                  pending=tuple(c for c in pending if c.new is not _DROPPED
                                                and c.old is not _DROPPED))
        return replace(state, tools=tools)

    def save(self, scope: str, session: str,
             update: Callable[[SessionState], SessionState]) -> SessionState:
        """Apply `update` to the stored state and write the result, again on a fresh read
        when another turn wrote in between."""
        key, ttl = _key(scope, session), self.slot_ttl_s * RECORD_TTL_FACTOR
        for _ in range(_CAS_TRIES):
            loaded = self.load(scope, session)
            state = update(loaded.state)
            stored = self.kept(state).as_dict()
            if loaded.version is None:
                if self.records.create(NAMESPACE, key, stored, ttl_s=ttl) is None:
                    return state
                continue  # created meanwhile by another turn: apply to that one
            try:
                self.records.put(NAMESPACE, key, stored, version=loaded.version, ttl_s=ttl)
                return state
            except VersionConflict:
                continue
        raise VersionConflict(f"session {session!r} kept changing while this turn was "
                              "saved; send the turn again")

    def delete(self, scope: str, session: str) -> bool:
        return self.records.delete(NAMESPACE, _key(scope, session))


def _key(scope: str, session: str) -> str:
    return f"{scope}\x1f{session}"
