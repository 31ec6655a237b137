"""What the mutation fuzz tier (test_mutation_fuzz.py, and issue 27's runs before it) found,
one request each, over a ScriptedEngine: every one was a 500 for a request that must be
refused with a 400 naming the parameter (and, for a schema, the JSON Pointer inside it)."""

from __future__ import annotations

import json

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


def _sent(client, path: str, body: bytes):
    resp = client.post(path, content=body, headers={"content-type": "application/json"})
    assert wire_problems(path, resp.status_code, dict(resp.headers), resp.content) == []
    return resp


def _error(resp) -> tuple[str | None, str]:
    """(param, message) in either API's error shape."""
    body = resp.json()
    if "strictcall" in body:  # Anthropic's body: the param is named in the message
        return None, body["error"]["message"]
    return body["error"]["param"], body["detail"]


def _with_schema(api: str, schema: dict) -> tuple[str, dict, str]:
    """(route, body, param) of a request on `api` whose client schema is `schema`."""
    tool = {"name": "f", "description": "d", "parameters": schema}
    if api == "chat":
        return "/v1/chat/completions", {"model": "scripted", "messages": USER, "tools": [
            {"type": "function", "function": tool}]}, "tools[0].function.parameters"
    if api == "chat_format":
        return "/v1/chat/completions", {"model": "scripted", "messages": USER,
                                        "response_format": {"type": "json_schema",
                                                            "json_schema": {"name": "x",
                                                                            "schema": schema}}}, \
            "response_format.json_schema.schema"
    if api == "responses":
        return "/v1/responses", {"model": "scripted", "input": "Hi", "tools": [
            {"type": "function", **tool}]}, "tools[0].parameters"
    if api == "responses_format":
        return "/v1/responses", {"model": "scripted", "input": "Hi", "text": {"format": {
            "type": "json_schema", "name": "x", "schema": schema}}}, "text.format.schema"
    if api == "messages":
        return "/v1/messages", {"model": "scripted", "max_tokens": 8, "messages": USER,
                                "tools": [{"name": "f", "input_schema": schema}]}, "tools[0]"
    return "/v1/grammars/compile", schema, "the schema"


APIS = ["chat", "chat_format", "responses", "responses_format", "messages", "compile"]


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(("schema", "pointer"), [
    ({"type": "object", "required": [{}]}, "/required/0"),  # TypeError: unhashable 'dict'
    ({"type": "object", "required": [["a"]]}, "/required/0"),  # unhashable 'list'
    ({"type": "object", "required": 5}, "/required"),  # 'int' object is not iterable
    ({"type": "object", "required": 1.5}, "/required"),  # 'float' object ...
    ({"type": "object", "required": True}, "/required"),  # 'bool' object ...
    ({"$schema": {}, "type": "object"}, "/$schema"),  # unhashable in validator_for
])
def test_a_malformed_client_schema_is_a_400_naming_the_pointer(client, api, schema, pointer):
    route, body, param = _with_schema(api, schema)
    resp = _sent(client, route, json.dumps(body).encode())
    assert resp.status_code == 400, resp.text
    named, message = _error(resp)
    assert f"at {pointer!r}" in message and "not a valid JSON Schema" in message
    if named is not None:
        assert named == (param if api != "compile" else "the schema")


@pytest.mark.parametrize("api", APIS)
def test_a_surrogate_sent_as_bytes_is_a_400_naming_where(client, api):
    """Python's parser decodes CESU-8 surrogate bytes (`\\xed\\xa0\\x80`) into a lone
    surrogate; only escapes were looked for: UnicodeEncodeError in the budgets, a 500."""
    route, body, _ = _with_schema(api, {"type": "object", "description": "@"})
    resp = _sent(client, route, json.dumps(body).encode().replace(b"@", b"\xed\xa0\x80"))
    assert resp.status_code == 400, resp.text
    _, message = _error(resp)
    assert "surrogate" in message and "description" in message


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity", b"1e400"])
@pytest.mark.parametrize("api", ["chat", "compile"])
def test_a_number_json_cannot_write_is_a_400_naming_where(client, api, literal):
    route, body, _ = _with_schema(api, {"type": "number", "maximum": 12345})
    resp = _sent(client, route, json.dumps(body).encode().replace(b"12345", literal))
    assert resp.status_code == 400, resp.text
    param, message = _error(resp)
    assert "maximum" in param and "finite number" in message


def test_a_surrogate_in_a_message_as_bytes_is_a_400(client):
    """The same bytes in a message reached the tokenizer: a TypeError, a 500."""
    body = json.dumps({"model": "scripted", "messages": [{"role": "user", "content": "@"}]})
    resp = _sent(client, "/v1/chat/completions", body.encode().replace(b"@", b"\xed\xb0\x80"))
    assert resp.status_code == 400 and _error(resp)[0] == "messages[0].content"
