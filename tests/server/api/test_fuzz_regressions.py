"""What the OpenAPI fuzz test (test_openapi_fuzz.py) found, one request each, over a
ScriptedEngine: every one was a 500 or a 503 engine failure for a body the API must either
serve or refuse with a 4xx in the route's error shape."""

from __future__ import annotations

import pytest

from tests.server.api.wire_checks import wire_problems

USER = [{"role": "user", "content": "Hi"}]


@pytest.fixture(scope="module")
def client(scripted):
    with scripted(lambda prompt: "Hello.", contracts=["contracts.examples"],
                  raise_server_exceptions=False) as c:
        yield c


def _sent(client, path: str, body: dict):
    resp = client.post(path, json=body)
    assert wire_problems(path, resp.status_code, dict(resp.headers), resp.content) == []
    return resp


@pytest.mark.parametrize("tools", [[None], [None, None, None, None], [1], ["web_search"]])
def test_a_messages_tool_that_is_no_object_is_a_400(client, tools):
    """`"tools": [null]` was an AttributeError in the tool discriminator: a 500."""
    resp = _sent(client, "/v1/messages", {"model": "scripted", "max_tokens": 8,
                                          "messages": USER, "tools": tools})
    assert resp.status_code == 400
    assert resp.json()["error"]["type"] == "invalid_request_error"
    assert "tools[0]" in resp.json()["error"]["message"]


@pytest.mark.parametrize("odd_type", [{}, [], {"a": 1}, ["text"]])
@pytest.mark.parametrize("where", ["block", "tool_choice", "result_part"])
def test_a_messages_type_that_is_no_string_is_a_400(client, odd_type, where):
    """`"type": {}` in a content block or tool_choice: the union's tag lookup hashed it, a
    TypeError and a 500."""
    body = {"model": "scripted", "max_tokens": 8, "messages": USER}
    if where == "block":
        body["messages"] = [{"role": "user", "content": [{"type": odd_type, "text": "x"}]}]
    elif where == "tool_choice":
        body["tool_choice"] = {"type": odd_type}
    else:
        body["messages"] = [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1",
             "content": [{"type": odd_type, "text": "x"}]}]}]
    resp = _sent(client, "/v1/messages", body)
    assert resp.status_code == 400
