"""`GET` and `DELETE /v1/sessions/{id}`: what a session has collected, and forgetting it.

An agent (or the person supervising it) can see a conversation's slots without sending a
turn: per tool, the values filled, the changes waiting for the user's confirmation, when
they expire. DELETE forgets the whole session, as `strictcall.reset_slots` does, but
without a decode. A session is its tenant's: another tenant's id answers as an unknown one
does (404). A Responses API chain's session id is in each response's
`strictcall.slots.session`. A contract's Redact() values show as "[redacted]": the store
keeps them sealed, and they are never shown (server/sessions/store.py)."""

from __future__ import annotations

import re
from typing import Any

from fastapi import Request

from server.api.deps import caller_of
from server.errors import InvalidRequest, RouteNotFound
from server.sessions import SessionStore, scope_of

# As `strictcall.session` takes it (server/options.py).
_SESSION_ID = re.compile(r"^[A-Za-z0-9._:@-]{1,128}$")


async def get_session(session_id: str, request: Request) -> dict[str, Any]:
    store, scope = _store_and_scope(request, session_id)
    loaded = await request.app.state.state.run(store.load, scope, session_id)
    if loaded.version is None:
        raise _not_found(session_id)
    now, ttl = store.now(), store.slot_ttl_s
    tools, expired = {}, []
    for name, slots in sorted(loaded.state.tools.items()):
        if slots.expired(now, ttl):
            expired.append(name)  # dropped by the next turn, and reported by it
            continue
        shown = store.shown(loaded.state).tools[name]
        tools[name] = {"filled": shown.values,
                       "confirm": [c.as_dict() for c in shown.pending],
                       "updated_at": round(slots.touched, 3),
                       "expires_at": round(slots.touched + ttl, 3)}
    intent = loaded.state.intent if loaded.state.intent in tools else None
    return {"id": session_id, "object": "session", "intent": intent, "tools": tools,
            "expired": expired}


async def delete_session(session_id: str, request: Request) -> dict[str, Any]:
    store, scope = _store_and_scope(request, session_id)
    if not await request.app.state.state.run(store.delete, scope, session_id):
        raise _not_found(session_id)
    return {"id": session_id, "object": "session.deleted", "deleted": True}


def _store_and_scope(request: Request, session_id: str) -> tuple[SessionStore, str]:
    if not _SESSION_ID.match(session_id):
        raise InvalidRequest(f"session id {session_id[:140]!r} is not one: 1 to 128 of "
                             "A-Z a-z 0-9 . _ : @ -, as strictcall.session takes it",
                             param="session_id")
    return request.app.state.sessions, scope_of(caller_of(request).identity)


def _not_found(session_id: str) -> RouteNotFound:
    return RouteNotFound(f"Session with id {session_id!r} not found: it never collected "
                         "anything, was deleted, has expired, or is not this tenant's.")
