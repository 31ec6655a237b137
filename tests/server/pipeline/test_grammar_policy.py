"""One grammar policy for every path that compiles a schema: requests, repairs and start-up
warm-up. Before it, repairs compiled with xgrammar's table and default policies whatever the
server's backend and policies, and warm-up without the policies (so the first request under
non-default policies missed the cache)."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from grammars import DEFAULT_POLICIES, POLICY_FLAGS, GrammarPolicy
from server.api.app import create_app
from server.engines.scripted import ScriptedEngine
from server.settings import GrammarPolicies, Settings

CONTRACTS = ["tests.server.execution.policy_contracts"]
REPAIR_MARK = "is not valid yet"


def _serve(model_dir, replies, **settings):
    """A server on a ScriptedEngine: the first decode answers replies[0], each repair the
    next reply."""
    left = list(replies)

    def script(prompt: str) -> str:
        repairing = REPAIR_MARK in prompt.rsplit("<|im_start|>user", 1)[-1]
        assert repairing == (len(left) < len(replies)), "a repair was expected here"
        return left.pop(0)

    app = create_app(Settings(served_model_name="scripted", contracts=CONTRACTS, **settings),
                     lambda s: ScriptedEngine(model_dir, script,
                                              grammar_backend=s.grammar_backend))
    return TestClient(app)


def _call(client):
    return client.post("/v1/chat/completions", json={
        "model": "scripted", "messages": [{"role": "user", "content": "register it"}],
        "tools": [{"type": "function", "function": {"name": "register_device"}}],
        "tool_choice": "required"})


def _arguments(resp) -> dict:
    assert resp.status_code == 200, resp.text
    (call,) = resp.json()["choices"][0]["message"]["tool_calls"]
    return json.loads(call["function"]["arguments"])


FIRST = '[{"name":"register_device","arguments":{"address":"%s","serial":"%s"}}]'


def test_first_contract_request_is_a_cache_hit_under_non_default_policies(model_dir):
    with _serve(model_dir, [FIRST % ("10.0.0.1", "ABC-1")], patterns="search") as client:
        resp = _call(client)
    # Warmed under --patterns search too: the same key as the request's.
    assert resp.headers["X-StrictCall-Grammar-Cache"] == "hit"


def test_repair_follows_the_servers_policies(model_dir):
    # Under --patterns search the serial may hold its match anywhere: the repair grammar
    # must allow what the request grammar allowed.
    repair = '{"serial":"s/n ABC-12 (box)"}'
    with _serve(model_dir, [FIRST % ("10.0.0.7", "s/n XXX-0"), repair],
                patterns="search") as client:
        resp = _call(client)
    assert _arguments(resp) == {"address": "10.0.0.7", "serial": "s/n ABC-12 (box)"}
    assert resp.json()["strictcall"]["repaired"] is True


def test_repair_under_the_outlines_backend(model_dir):
    # outlines-core writes no `ipv4` format: under its table the format is the validator's;
    # a repair grammar built with xgrammar's table could not compile at all.
    repair = '{"address":"10.0.0.7"}'
    with _serve(model_dir, [FIRST % ("8.8.8.8", "ABC-1"), repair],
                grammar_backend="outlines") as client:
        resp = _call(client)
    assert _arguments(resp) == {"address": "10.0.0.7", "serial": "ABC-1"}
    assert resp.json()["strictcall"]["repaired"] is True


def test_policy_flags_are_one_table():
    fields = GrammarPolicies.model_fields
    for flag in POLICY_FLAGS:
        assert fields[flag.name].default == flag.default == DEFAULT_POLICIES[flag.name]
    reading = {f.name: f.json_schema_reading for f in POLICY_FLAGS}
    assert Settings(**reading).policies.model_dump() == reading


def test_policy_configures_the_backend_or_refuses(backend, tokenizer):
    from grammars import make_backend

    loose = make_backend("xgrammar", tokenizer, vocab_size=len(tokenizer),
                         stop_token_ids=[tokenizer.eos_token_id])
    policy = GrammarPolicy.for_backend(loose, {"strict_objects": False, "patterns": "search"})
    assert (policy.keywords.strict_objects, policy.keywords.patterns) == (False, "search")
    assert not loose.keywords.strict_objects  # the compile option follows
    outlines = make_backend("outlines", tokenizer, vocab_size=len(tokenizer),
                            stop_token_ids=[tokenizer.eos_token_id])
    with pytest.raises(ValueError, match="strict objects"):
        GrammarPolicy.for_backend(outlines, {"strict_objects": False})
