"""`GET` and `DELETE /v1/sessions/{id}` over a ScriptedEngine: a session's slots seen
without a turn, forgotten by DELETE, and never another tenant's (404, as an unknown id)."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from contracts import clock
from server.identity import KeyRing
from tests.scripted import Replies, assert_problem

KEYS = [{"key": "sk-acme-agent-0123456789", "name": "agent", "tenant": "acme"},
        {"key": "sk-acme-other-0123456789", "name": "other", "tenant": "acme"},
        {"key": "sk-globex-agent-01234567", "name": "rival", "tenant": "globex"}]
DISPUTE = "yesterday my card •• 4417 was charged 1 200,50 twice"
YESTERDAY = (clock.today() - dt.timedelta(days=1)).isoformat()
FIRST = {"card_last4": "4417", "operation_date": YESTERDAY, "amount": "1200.50",
         "reason": "duplicate", "original_operation_id": None}
KNOWN = {"card_last4": "4417", "operation_date": YESTERDAY, "amount": "1200.50",
         "reason": "duplicate"}


@pytest.fixture(scope="module")
def app_client(scripted):
    replies = Replies()
    replies.text = json.dumps([{"name": "open_dispute", "arguments": FIRST}],
                              separators=(",", ":"))
    with scripted(replies, contracts=["contracts.examples"], state_url="memory://",
                  app={"keys": KeyRing.of(KEYS)}) as c:
        yield c


def auth(i: int = 0) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[i]['key']}"}


def turn(client, session: str, key: int = 0) -> dict:
    resp = client.post("/v1/chat/completions", headers=auth(key), json={
        "model": "scripted", "messages": [{"role": "user", "content": DISPUTE}],
        "tools": [{"type": "function", "function": {"name": "open_dispute"}}],
        "tool_choice": {"type": "function", "function": {"name": "open_dispute"}},
        "strictcall": {"session": session}})
    assert resp.status_code == 200, resp.text
    return resp.json()["strictcall"]["slots"]


def test_a_session_shows_its_slots_without_a_turn(app_client):
    slots = turn(app_client, "seen")
    got = app_client.get("/v1/sessions/seen", headers=auth(1))  # a colleague: same tenant
    assert got.status_code == 200
    body = got.json()
    assert body["id"] == "seen" and body["object"] == "session"
    assert body["intent"] == "open_dispute" and body["expired"] == []
    (tool,) = body["tools"].items()
    # The card's digits are a Redact() field: kept sealed, never shown.
    assert tool[0] == "open_dispute" and tool[1]["filled"] == {**KNOWN,
                                                               "card_last4": "[redacted]"}
    assert "4417" not in got.text
    assert tool[1]["confirm"] == [] and tool[1]["expires_at"] == slots["expires_at"]


def test_delete_forgets_the_session(app_client):
    turn(app_client, "forgotten")
    deleted = app_client.delete("/v1/sessions/forgotten", headers=auth())
    assert deleted.json() == {"id": "forgotten", "object": "session.deleted", "deleted": True}
    for ask in (app_client.get, app_client.delete):
        assert_problem(ask("/v1/sessions/forgotten", headers=auth()), 404,
                       says="Session with id 'forgotten' not found")


def test_another_tenants_session_is_unknown(app_client):
    turn(app_client, "ours")
    assert_problem(app_client.get("/v1/sessions/ours", headers=auth(2)), 404)
    assert_problem(app_client.delete("/v1/sessions/ours", headers=auth(2)), 404)
    assert app_client.get("/v1/sessions/ours", headers=auth()).status_code == 200  # kept


def test_expired_slots_are_listed_as_expired(app_client):
    sessions = app_client.app.state.sessions
    turn(app_client, "aging")
    now = sessions.now()
    sessions.clock = lambda: now + sessions.slot_ttl_s
    try:
        body = app_client.get("/v1/sessions/aging", headers=auth()).json()
    finally:
        sessions.clock = sessions.records.now
    assert body["tools"] == {} and body["expired"] == ["open_dispute"]
    assert body["intent"] is None


def test_a_bad_session_id_is_a_400_naming_it(app_client):
    assert_problem(app_client.get("/v1/sessions/not%20one!", headers=auth()), 400,
                   param="session_id")
