"""What the OpenAPI fuzz test (test_openapi_fuzz.py) found, one request each, over a
ScriptedEngine: every one was a 500 or a 503 engine failure for a body the API must either
serve or refuse with a 4xx in the route's error shape."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from server.api.app import create_app
from server.engines.scripted import ScriptedEngine
from server.settings import Settings
from tests.fuzz.wire_checks import wire_problems

USER = [{"role": "user", "content": "Hi"}]


@pytest.fixture(scope="module")
def client(model_dir):
    settings = Settings(served_model_name="scripted", contracts=["contracts.examples"])
    app = create_app(settings, lambda s: ScriptedEngine(model_dir, lambda prompt: "Hello."))
    with TestClient(app, raise_server_exceptions=False) as c:
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
