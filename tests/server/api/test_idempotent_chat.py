"""A chat turn retried with one `Idempotency-Key` (a timeout, a dropped connection): the
retry gets the first answer back, with the same call ids and the same idempotency keys on
its write calls, so executing the calls of both answers runs the write once. Through the
real server process on the embedded model, the Chat Completions, Responses and Messages
routes alike (server/execution/replays.py)."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from tests.live import MODEL

pytestmark = pytest.mark.slow
TENANT = {"X-Tenant-Id": "acme"}
STUCK = ("My access request AR-004217 has been pending for a week and I still cannot open "
         "payroll. Please open an urgent ticket.")
CHAT = {"model": MODEL, "max_tokens": 300, "temperature": 0.9,  # sampled: two runs differ
        "tools": [{"type": "function", "function": {"name": "open_urgent_ticket"}}],
        "tool_choice": {"type": "function", "function": {"name": "open_urgent_ticket"}},
        "messages": [{"role": "user", "content": STUCK}]}


def _post(url: str, body: dict, key: str | None, path: str = "/v1/chat/completions"
          ) -> httpx.Response:
    headers = {**TENANT, **({"Idempotency-Key": key} if key else {})}
    return httpx.post(url + path, json=body, headers=headers, timeout=300)


def _calls(answer: dict) -> list[tuple[str, dict, str]]:
    """Each call: its id, its arguments, its idempotency key."""
    keys = {n["id"]: n.get("idempotency_key") for n in answer["strictcall"].get("calls", ())}
    return [(c["id"], json.loads(c["function"]["arguments"]), keys[c["id"]])
            for c in answer["choices"][0]["message"].get("tool_calls") or ()]


def test_a_retried_turn_gets_the_same_answer_and_the_write_runs_once(live_server):
    key = f"turn-{uuid.uuid4().hex}"
    first, retried = _post(live_server, CHAT, key), _post(live_server, CHAT, key)
    assert first.status_code == retried.status_code == 200, retried.text
    assert retried.json() == first.json()
    assert retried.headers["idempotent-replayed"] == "true"
    assert "idempotent-replayed" not in first.headers
    # Without the header, the same request is a new answer (a new id, new call keys).
    other = _post(live_server, CHAT, None)
    # (Sampled: max_tokens leaves the call room, so a summary of 200 characters still ends.)
    assert other.json()["choices"][0]["finish_reason"] == "tool_calls", other.text
    assert other.json()["id"] != first.json()["id"]
    ((call_id, arguments, call_key),) = _calls(first.json())
    assert call_key and (call_id, call_key) != _calls(other.json())[0][::2]
    runs = []
    for answer in (first.json(), retried.json()):
        for _, arguments, call_key in _calls(answer):
            ran = httpx.post(f"{live_server}/v1/tools/open_urgent_ticket/invoke", headers=TENANT,
                             json={"arguments": arguments, "idempotency_key": call_key},
                             timeout=60)
            assert ran.status_code == 200, ran.text
            runs.append(ran.json())
    assert [r["replayed"] for r in runs] == [False, True]  # one write, its outcome shared
    assert runs[0]["result"] == runs[1]["result"]


def test_a_key_sent_with_another_body_or_a_stream_is_refused(live_server):
    key = f"turn-{uuid.uuid4().hex}"
    assert _post(live_server, CHAT, key).status_code == 200
    changed = _post(live_server, {**CHAT, "max_tokens": 301}, key)
    assert changed.status_code == 409, changed.text
    assert changed.json()["error"]["code"] == "idempotency_key_reused"
    streamed = _post(live_server, {**CHAT, "stream": True}, f"s-{uuid.uuid4().hex}")
    assert streamed.status_code == 400
    assert streamed.json()["error"]["code"] == "idempotency_key_stream"
    # Another tenant's same key is its own.
    theirs = httpx.post(live_server + "/v1/chat/completions", json={**CHAT, "max_tokens": 301},
                        headers={"X-Tenant-Id": "other", "Idempotency-Key": key}, timeout=300)
    assert theirs.status_code == 200


@pytest.mark.parametrize(("path", "body"), [
    ("/v1/responses", {"model": MODEL, "input": STUCK, "max_output_tokens": 300,
                       "temperature": 0.9, "store": False,
                       "tools": [{"type": "function", "name": "open_urgent_ticket",
                                  "parameters": None}], "tool_choice": "required"}),
    ("/v1/messages", {"model": MODEL, "max_tokens": 300, "temperature": 0.9,
                      "tools": [{"name": "open_urgent_ticket",
                                 "input_schema": {"type": "object"}}],
                      "tool_choice": {"type": "any"},
                      "messages": [{"role": "user", "content": STUCK}]})])
def test_the_responses_and_messages_routes_replay_too(live_server, path, body):
    key = f"turn-{uuid.uuid4().hex}"
    first, retried = _post(live_server, body, key, path), _post(live_server, body, key, path)
    assert first.status_code == retried.status_code == 200, retried.text
    assert retried.json() == first.json() and retried.headers["idempotent-replayed"] == "true"
