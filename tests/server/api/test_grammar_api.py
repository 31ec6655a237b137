"""POST /v1/grammars/compile and the enforcement report on chat completions."""

from __future__ import annotations

import json

import pytest

from tests.scripted import assert_problem
from tests.server.api.test_chat_api import chat

TAGS = {"type": "object", "properties": {
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "uniqueItems": True,
             "description": "distinct tags"}},
    "required": ["tags"], "additionalProperties": False}


def test_compile_reports_every_keyword_and_caches(client):
    first = client.post("/v1/grammars/compile", json=TAGS)
    assert first.status_code == 200, first.text
    body = first.json()
    assert body["cache"] == "miss" and body["backend"] == "xgrammar"
    assert body["compile_ms"] > 0
    report = body["enforcement"]
    assert report["counts"] == {"grammar": 8, "validator": 1, "annotation": 1, "rejected": 0}
    found = {(k["pointer"], k["tier"]) for k in report["keywords"]}
    assert ("/properties/tags/uniqueItems", "validator") in found
    assert ("/properties/tags/items/maxLength", "grammar") in found
    again = client.post("/v1/grammars/compile", json=TAGS).json()
    assert again["cache"] == "hit" and again["key"] == body["key"]


def test_compile_refuses_what_nothing_enforces_naming_each(client):
    schema = {"type": "object", "properties": {
        "a": {"type": "string", "nullable": True},
        "b": {"type": "string", "format": "phone"}}}
    resp = client.post("/v1/grammars/compile", json=schema)
    assert_problem(resp, 400, says="nullable")
    body = resp.json()
    assert body["error"]["code"] == "invalid_schema"
    assert [k["pointer"] for k in body["keywords"]] == ["/properties/a/nullable",
                                                        "/properties/b/format"]
    assert "POST /v1/grammars/compile" in body["detail"] or "pattern" in body["detail"]


def test_compile_checks_budgets_and_shape(client):
    assert_problem(client.post("/v1/grammars/compile", json=[1, 2]), 400, says="JSON object")
    huge = {"enum": list(range(5000))}
    resp = client.post("/v1/grammars/compile", json=huge)
    assert_problem(resp, 400)
    assert resp.json()["error"]["code"] == "budget_exceeded"


def test_chat_completion_carries_the_enforcement_summary(client, replies):
    replies.text = '{"tags":["a","b"]}'
    resp = chat(client, response_format={"type": "json_schema", "json_schema": {
        "name": "t", "schema": TAGS}})
    assert resp.status_code == 200, resp.text
    header = resp.headers["X-StrictCall-Enforcement"]
    assert header.startswith("grammar=8, validator=1, annotation=1")
    assert "uniqueItems@/properties/tags/uniqueItems" in header


def test_validator_tier_keyword_broken_by_the_output_is_a_422(client, replies):
    replies.text = '{"tags":["a","a"]}'  # the mask allows it: uniqueItems is validator-tier
    resp = chat(client, response_format={"type": "json_schema", "json_schema": {
        "name": "t", "schema": TAGS}})
    assert_problem(resp, 422, says="non-unique")
    assert resp.json()["violations"][0]["pointer"] == "/tags"


def test_tool_reports_are_prefixed_with_the_tool_name(client, replies):
    replies.text = '[{"name":"tag","arguments":{"tags":["x"]}}]'
    tool = {"type": "function", "function": {"name": "tag", "parameters": TAGS}}
    resp = chat(client, tools=[tool], tool_choice="required")
    assert resp.status_code == 200, resp.text
    assert "uniqueItems@tag#/properties/tags/uniqueItems" in \
        resp.headers["X-StrictCall-Enforcement"]
    assert json.loads(resp.json()["choices"][0]["message"]["tool_calls"][0]["function"][
        "arguments"]) == {"tags": ["x"]}


def test_restart_loads_contract_grammars_from_disk(model_dir, tmp_path):
    from fastapi.testclient import TestClient

    from server.api.app import create_app
    from server.engines.scripted import ScriptedEngine
    from server.settings import Settings

    settings = Settings(served_model_name="scripted", contracts=["contracts.examples"],
                        cache_dir=tmp_path, grammar_disk_cache=True)

    def boot() -> dict:
        app = create_app(settings, lambda s: ScriptedEngine(model_dir, lambda p: "{}"))
        with TestClient(app) as c:
            cache = c.get("/health").json()["grammar_cache"]
            metrics = c.get("/metrics").text
        return cache, metrics

    first, _ = boot()
    assert (first["compiles"], first["disk_loads"]) == (32, 0)  # 8 contracts x 4 grammars
    assert len(list((tmp_path / "grammars").glob("*.json"))) == 32
    second, metrics = boot()
    assert (second["compiles"], second["disk_loads"]) == (0, 32)
    assert "strictcall_grammar_cache_disk_loads_total 32" in metrics


def _nested_unions(depth: int) -> dict:
    """Unions of objects and arrays, nested: the grammar grows exponentially with depth."""
    if depth == 0:
        return {"type": "string", "maxLength": 5}
    inner = _nested_unions(depth - 1)
    return {"anyOf": [{"type": "object", "properties": {"a": inner, "b": inner}},
                      {"type": "array", "items": inner}]}


@pytest.mark.parametrize(("schema", "limit"), [
    (_nested_unions(8), "max_schema_bytes"),     # 466 kB
    (_nested_unions(6), "max_depth"),            # 58 kB, but 13 levels deep
    ({"enum": [f"v{i}" for i in range(5000)]}, "max_enum_values"),
])
def test_pathological_schemas_are_refused_by_budget_before_compiling(client, schema, limit):
    resp = client.post("/v1/grammars/compile", json=schema)
    assert_problem(resp, 400)
    assert resp.json()["limit"] == limit
    assert client.get("/health").json()["grammar_cache"]["compiles"] == 0


def test_pathological_compile_times_out_while_others_are_served(model_dir):
    """Budgets raised so that a schema xgrammar needs ~2 s for gets through: its request is
    a 400 grammar_timeout at the timeout, while health checks and another schema's request
    are answered meanwhile; the compile finishes in the background and is kept. Its compile
    is held until the test releases it, so all of that is shown to happen while it runs,
    however fast this machine compiles."""
    import threading

    from fastapi.testclient import TestClient

    from server.api.app import create_app
    from server.engines.scripted import ScriptedEngine
    from server.settings import Settings
    from tests.server.api.held_compile import HeldCompile

    settings = Settings(served_model_name="scripted", compile_timeout_s=0.3,
                        max_depth=40, max_schema_bytes=10**6)
    held: dict = {}

    def factory(settings):
        engine = ScriptedEngine(model_dir, lambda p: '{"n":1}')
        held["compile"] = engine.grammar_backend.compile = HeldCompile(
            engine.grammar_backend.compile,
            holds=lambda spec: "anyOf" in json.dumps(spec.json_schema()))
        return engine

    app = create_app(settings, factory)
    with TestClient(app) as c:
        compile_, slow = held["compile"], {}
        thread = threading.Thread(target=lambda: slow.update(
            resp=c.post("/v1/grammars/compile", json=_nested_unions(7))), daemon=True)
        thread.start()
        assert compile_.entered.wait(timeout=120), "the pathological compile never started"
        assert c.get("/health").status_code == 200
        fast = chat(c, response_format={"type": "json_schema", "json_schema": {
            "name": "n", "schema": {"type": "object", "properties": {"n": {"type": "integer"}},
                                    "required": ["n"]}}})
        assert fast.status_code == 200, fast.text
        thread.join(timeout=120)
        # Health, the other schema and the timeout all came while the compile was held.
        assert not thread.is_alive() and not compile_.left.is_set()
        assert_problem(slow["resp"], 400, says="longer than 0.3 s")
        assert slow["resp"].json()["error"]["code"] == "grammar_timeout"
        compiles = c.get("/health").json()["grammar_cache"]["compiles"]
        compile_.release.set()
        assert compile_.returned.wait(timeout=120), "the released compile did not finish"
        # Asked again: the background compile's grammar (cached, or just being stored).
        again = c.post("/v1/grammars/compile", json=_nested_unions(7))
        assert again.status_code == 200, again.text
        cache = c.get("/health").json()["grammar_cache"]
        assert cache["compiles"] == compiles and cache["entries"] == 2


def test_outlines_backend_serves_tool_calls_and_reports_its_own_table(model_dir):
    from fastapi.testclient import TestClient

    from server.api.app import create_app
    from server.engines.scripted import ScriptedEngine
    from server.settings import Settings

    settings = Settings(served_model_name="scripted", grammar_backend="outlines")
    app = create_app(settings, lambda s: ScriptedEngine(
        model_dir, lambda p: '[{"name":"f","arguments":{"n":7}}]',
        grammar_backend=s.grammar_backend))
    tool = {"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"n": {"type": "integer", "maximum": 9}},
        "required": ["n"]}}}
    with TestClient(app) as c:
        resp = chat(c, tools=[tool], tool_choice="required")
        assert resp.status_code == 200, resp.text
        assert "validator: maximum@f#/properties/n/maximum" in \
            resp.headers["X-StrictCall-Enforcement"]
        report = c.post("/v1/grammars/compile", json={"type": "integer", "maximum": 9}).json()
        assert report["backend"] == "outlines-core"
        auto = chat(c, tools=[tool], tool_choice="auto")  # decide: works without tags
        assert auto.status_code == 200, auto.text


def test_json_schema_reading_policies_are_per_server(model_dir):
    """--patterns search, --no-strict-objects, --unknown-keywords annotation: JSON Schema's
    own reading, reported as such; the decoded value follows it."""
    from fastapi.testclient import TestClient

    from server.api.app import create_app
    from server.engines.scripted import ScriptedEngine
    from server.settings import Settings

    schema = {"type": "object", "properties": {"url": {"type": "string",
                                                       "pattern": "https?://"}},
              "required": ["url"], "standsFor": "link"}
    reply = '{"url":"see https://example.com","note":"an unlisted key"}'
    settings = Settings(served_model_name="scripted", patterns="search", strict_objects=False,
                        unknown_keywords="annotation", implied_types=False,
                        number_bounds="validator", bounded_strings="validator")
    app = create_app(settings, lambda s: ScriptedEngine(model_dir, lambda p: reply))
    with TestClient(app) as c:
        report = c.post("/v1/grammars/compile", json=schema).json()["enforcement"]
        notes = {k["keyword"]: k.get("note", "") for k in report["keywords"]}
        assert "--bounded-strings validator" in notes["pattern"]
        assert "policy" in notes["standsFor"]
        bounds = c.post("/v1/grammars/compile", json={"type": "number", "maximum": 1}).json()
        assert [k["tier"] for k in bounds["enforcement"]["keywords"]
                if k["keyword"] == "maximum"] == ["validator"]
        resp = chat(c, response_format={"type": "json_schema", "json_schema": {
            "name": "u", "schema": schema}})
        assert resp.status_code == 200, resp.text
        assert json.loads(resp.json()["choices"][0]["message"]["content"]) == json.loads(reply)


def test_default_policy_notes_whole_match_patterns(client):
    report = client.post("/v1/grammars/compile", json={
        "type": "string", "pattern": "^https?://"}).json()["enforcement"]
    pattern = next(k for k in report["keywords"] if k["keyword"] == "pattern")
    assert pattern["tier"] == "grammar" and "whole matches" in pattern["note"]


def test_llguidance_backend_serves_auto_calls_by_trigger_and_reports_its_own_table(model_dir):
    """--grammar-backend llguidance --auto-tools trigger: text, then a call under the Lark
    grammar that stands in for xgrammar's structural tag."""
    from fastapi.testclient import TestClient

    from server.api.app import create_app
    from server.engines.scripted import ScriptedEngine
    from server.settings import Settings

    settings = Settings(served_model_name="scripted", grammar_backend="llguidance",
                        auto_tools="trigger")
    reply = 'Let me check. <tool_call>[{"name":"f","arguments":{"n":7}}]</tool_call>'
    app = create_app(settings, lambda s: ScriptedEngine(
        model_dir, lambda p: reply, grammar_backend=s.grammar_backend))
    tool = {"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"n": {"type": "integer", "multipleOf": 7}},
        "required": ["n"]}}}
    with TestClient(app) as c:
        resp = chat(c, tools=[tool], tool_choice="auto")
        assert resp.status_code == 200, resp.text
        (call,) = resp.json()["choices"][0]["message"]["tool_calls"]
        assert json.loads(call["function"]["arguments"]) == {"n": 7}
        report = c.post("/v1/grammars/compile", json={"type": "number", "multipleOf": 7}).json()
        assert report["backend"] == "llguidance"
        assert [k["tier"] for k in report["enforcement"]["keywords"]
                if k["keyword"] == "multipleOf"] == ["grammar"]  # xgrammar: validator


def test_a_tool_no_arguments_can_satisfy_is_a_400_before_any_decode(client, replies):
    """BFCL live_simple's shape (an array property whose enum lists strings): the model is
    never asked (scripted to answer, it would have ended in a 422); the 400 names the
    pointer and says how to write it."""
    replies.text = '{"units": ["c"]}'
    tool = {"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"units": {"type": "array", "enum": ["c", "f"]}}}}}
    resp = chat(client, tools=[tool], tool_choice="required")
    assert_problem(resp, 400, says="put the 'enum' under 'items'")
    assert "/properties/units/enum" in resp.text
