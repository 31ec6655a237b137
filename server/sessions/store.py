"""`SessionStore`: sessions' slots as records of the state store (server/state,
`--state-url`, namespace "sessions"): SQLite by default, Postgres where replicas share
them, so a conversation begun on one replica goes on on another. A session is scoped by the
caller's tenant: the record's key starts with it, so an API key never reads or writes
another tenant's session, whatever id it sends.

Every write is a compare-and-set on the record's version (`StateStore.put(version=...)`):
two turns of one session on two replicas at once cannot overwrite each other unseen; the
later one applies its change to what the earlier one wrote."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from server.identity import Identity
from server.sessions.state import SessionState
from server.state import StateStore, VersionConflict

NAMESPACE = "sessions"
# A session record outlives its slots by this factor of the slot TTL, so a turn after the
# slots expired can still say which ones did (then the record goes).
RECORD_TTL_FACTOR = 2
_CAS_TRIES = 8


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
                 clock: Callable[[], float] | None = None) -> None:
        self.records = records
        self.slot_ttl_s = slot_ttl_s
        # The store's clock by default: replicas compare ages with one clock, not their own.
        self.clock = clock or records.now

    def now(self) -> float:
        return self.clock()

    def load(self, scope: str, session: str) -> Loaded:
        found = self.records.get(NAMESPACE, _key(scope, session))
        if found is None:
            return Loaded(SessionState(), None)
        return Loaded(SessionState.of(found.value), found.version)

    def save(self, scope: str, session: str,
             update: Callable[[SessionState], SessionState]) -> SessionState:
        """Apply `update` to the stored state and write the result, again on a fresh read
        when another turn wrote in between."""
        key, ttl = _key(scope, session), self.slot_ttl_s * RECORD_TTL_FACTOR
        for _ in range(_CAS_TRIES):
            loaded = self.load(scope, session)
            state = update(loaded.state)
            if loaded.version is None:
                if self.records.create(NAMESPACE, key, state.as_dict(), ttl_s=ttl) is None:
                    return state
                continue  # created meanwhile by another turn: apply to that one
            try:
                self.records.put(NAMESPACE, key, state.as_dict(), version=loaded.version,
                                 ttl_s=ttl)
                return state
            except VersionConflict:
                continue
        raise VersionConflict(f"session {session!r} kept changing while this turn was "
                              "saved; send the turn again")

    def delete(self, scope: str, session: str) -> bool:
        return self.records.delete(NAMESPACE, _key(scope, session))


def _key(scope: str, session: str) -> str:
    return f"{scope}\x1f{session}"
