"""What the mutation fuzz tier (test_mutation_fuzz.py, and issue 27's runs before it) found,
one request each, over a ScriptedEngine: every one was a 500 for a request that must be
refused with a 400 naming the parameter (and, for a schema, the JSON Pointer inside it)."""

from __future__ import annotations

import json

import pytest

from tests.server.api.wire_checks import wire_problems

USER = [{"role": "user", "content": "Hi"}]


@pytest.fixture(scope="module")
def client(scripted):
    with scripted(lambda prompt: "Hello.", contracts=["contracts.examples"],
                  raise_server_exceptions=False) as c:
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


def _deep(levels: int) -> str:
    return '{"a": ' * levels + "1" + "}" * levels


@pytest.mark.parametrize("route", ["/v1/contracts/reissue_card/validate",
                                   "/v1/tools/check_access_request_status/invoke"])
def test_arguments_nested_past_the_limit_are_a_400_naming_where(client, route):
    """800 levels: the violation's value went through dataclasses.asdict, a RecursionError
    and a 500."""
    body = f'{{"arguments": {{"request_id": {_deep(800)}}}}}'.encode()
    resp = _sent(client, route, body)
    assert resp.status_code == 400, resp.text
    param, message = _error(resp)
    assert param.startswith("arguments.request_id.a.a") and "more than 128 deep" in message


def test_a_seed_past_64_bits_is_a_400():
    """10**30 reached torch's manual_seed: "Overflow when unpacking long long", an engine
    failure (503) on every engine that seeds a generator."""
    from server.api.chat.wire import ChatCompletionRequest

    with pytest.raises(ValueError, match="seed"):
        ChatCompletionRequest.model_validate({"model": "m", "messages": USER, "seed": 10**30})
    ChatCompletionRequest.model_validate({"model": "m", "messages": USER, "seed": 2**63 - 1})


def test_a_seed_past_64_bits_is_a_400_naming_it(client):
    body = {"model": "scripted", "messages": USER, "seed": 10**30}
    resp = _sent(client, "/v1/chat/completions", json.dumps(body).encode())
    assert resp.status_code == 400 and _error(resp)[0] == "seed"


def test_an_idempotency_key_header_that_breaks_its_rules_is_a_400(client):
    """The header was validated by InvokeBody.model_validate outside FastAPI's request
    validation: a pydantic ValidationError, a 500."""
    resp = client.post("/v1/tools/check_access_request_status/invoke",
                       json={"arguments": {"request_id": "AR-004217"}},
                       headers={"Idempotency-Key": b"\xff\xfe"})  # latin-1 text
    assert wire_problems("/invoke", resp.status_code, dict(resp.headers), resp.content) == []
    assert resp.status_code == 400 and _error(resp)[0] == "Idempotency-Key"


def test_a_messages_turn_with_no_content_is_a_400_naming_it(client):
    """`"content": []` made no chat message at all; the chat request then failed its own
    validation with no parameter named."""
    body = {"model": "scripted", "max_tokens": 8, "messages": [{"role": "user",
                                                                "content": []}]}
    resp = _sent(client, "/v1/messages", json.dumps(body).encode())
    assert resp.status_code == 400
    assert resp.json()["strictcall"]["param"] == "messages[0].content"


@pytest.mark.parametrize(("schema", "says"), [
    ({"type": "integer", "minimum": 2**70}, "Integer exceeds maximum limit"),
    # Bounds that leave nothing: refused by the schema check before xgrammar sees them.
    ({"type": "array", "minItems": 5, "maxItems": 1}, "'minItems' 5 is above 'maxItems' 1"),
    ({"type": "number", "exclusiveMinimum": 3, "exclusiveMaximum": 3}, "leave no room"),
])
@pytest.mark.parametrize("api", ["compile", "chat_format", "responses_format", "messages"])
def test_a_schema_the_grammar_library_rejects_is_a_400_naming_it_without_its_files(
        client, api, schema, says):
    """xgrammar's message carried its C++ source path ("/project/cpp/json_schema_converter.
    cc:974: Check failed: ...") into the answer, and the 400 named no parameter."""
    route, body, param = _with_schema(api, schema)
    resp = _sent(client, route, json.dumps(body).encode())
    assert resp.status_code == 400, resp.text
    assert ".cc" not in resp.text and "/project" not in resp.text and "Check failed" \
        not in resp.text
    named = resp.json()["strictcall"]["param"] if api == "messages" else _error(resp)[0]
    # The schema check names the tool's own field; xgrammar's refusal, the tools.
    on_messages = "tools" if schema.get("minimum") else "tools[0].input_schema"
    assert says in resp.text and named == {"compile": "the schema", "messages": on_messages,
                                           "chat_format": param,
                                           "responses_format": param}[api]


def test_arguments_that_break_a_contract_name_the_parameter(client):
    resp = client.post("/v1/tools/check_access_request_status/invoke",
                       json={"arguments": {"request_id": "nope"}})
    assert resp.status_code == 422
    assert resp.json()["error"]["param"] == "arguments.request_id"


def test_the_anthropic_body_names_the_parameter_as_the_client_sent_it(client):
    route, body, _ = _with_schema("messages", {"type": "object", "required": 5})
    resp = _sent(client, route, json.dumps(body).encode())
    assert resp.json()["strictcall"]["param"] == "tools[0].input_schema"
