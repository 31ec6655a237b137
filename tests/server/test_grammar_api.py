"""POST /v1/grammars/compile and the enforcement report on chat completions."""

from __future__ import annotations

import json

from tests.server.test_api import USER, assert_problem, chat, client, replies  # noqa: F401

TAGS = {"type": "object", "properties": {
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "uniqueItems": True,
             "description": "distinct tags"}},
    "required": ["tags"], "additionalProperties": False}


def test_compile_reports_every_keyword_and_caches(client):  # noqa: F811
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


def test_compile_refuses_what_nothing_enforces_naming_each(client):  # noqa: F811
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


def test_compile_checks_budgets_and_shape(client):  # noqa: F811
    assert_problem(client.post("/v1/grammars/compile", json=[1, 2]), 400, says="JSON object")
    huge = {"enum": list(range(5000))}
    resp = client.post("/v1/grammars/compile", json=huge)
    assert_problem(resp, 400)
    assert resp.json()["error"]["code"] == "budget_exceeded"


def test_chat_completion_carries_the_enforcement_summary(client, replies):  # noqa: F811
    replies.text = '{"tags":["a","b"]}'
    resp = chat(client, response_format={"type": "json_schema", "json_schema": {
        "name": "t", "schema": TAGS}})
    assert resp.status_code == 200, resp.text
    header = resp.headers["X-StrictCall-Enforcement"]
    assert header.startswith("grammar=8, validator=1, annotation=1")
    assert "uniqueItems@/properties/tags/uniqueItems" in header


def test_validator_tier_keyword_broken_by_the_output_is_a_422(client, replies):  # noqa: F811
    replies.text = '{"tags":["a","a"]}'  # the mask allows it: uniqueItems is validator-tier
    resp = chat(client, response_format={"type": "json_schema", "json_schema": {
        "name": "t", "schema": TAGS}})
    assert_problem(resp, 422, says="non-unique")
    assert resp.json()["violations"][0]["pointer"] == "/tags"


def test_tool_reports_are_prefixed_with_the_tool_name(client, replies):  # noqa: F811
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
    assert (first["compiles"], first["disk_loads"]) == (20, 0)
    assert len(list((tmp_path / "grammars").glob("*.json"))) == 20
    second, metrics = boot()
    assert (second["compiles"], second["disk_loads"]) == (0, 20)
    assert "strictcall_grammar_cache_disk_loads_total 20" in metrics
