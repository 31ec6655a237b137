"""Conversations that outlive a request: sessions' slots (the arguments collected across
turns, server/sessions/session.py) and stored Responses API responses, each behind a small
store over the state store (server/state: SQLite by default, Postgres for replicas), scoped
by the caller's tenant. The pipeline fills and reads the slots (server/pipeline/
slotting.py); the Responses API stores and chains responses (server/api/responses/
stored.py)."""

from server.sessions.responses import ResponseStore, StoredResponse
from server.sessions.session import Change, SessionState, ToolSlots
from server.sessions.store import Loaded, SessionStore, scope_of

__all__ = ["Change", "Loaded", "ResponseStore", "SessionState", "SessionStore",
           "StoredResponse", "ToolSlots", "scope_of"]
