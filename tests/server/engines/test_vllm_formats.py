"""Model formats on the vLLM engine: a Qwen3-architecture model (random weights, Qwen3's
real tokenizer and chat template) behind `strictcall serve --engine vllm`. The family's
structural tag, with the reasoning budget in it, passes through vLLM's structured outputs
(its pinned xgrammar 0.2.8) and every call comes back valid."""

from __future__ import annotations

import json

import jsonschema
import pytest

from server.process import ServerProcess
from tests.server.formats.real_families import tiny_qwen3
from tests.server.formats.test_qwen_e2e import ALARM, ASK, LIGHTS
from tests.tiers import needs_module

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


@pytest.fixture(scope="module", autouse=True)
def _vllm_installed() -> None:
    needs_module("vllm", "make setup-vllm")


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    from openai import OpenAI

    model = tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3"))
    try:
        with ServerProcess("--engine", "vllm", "--model", str(model), "--served-model-name",
                           "q", startup_s=300) as proc, \
                OpenAI(base_url=f"{proc.base_url}/v1", api_key="-", max_retries=0,
                       timeout=300) as client:
            assert "model format qwen_3" in proc.log_path.read_text()
            yield client
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.mark.parametrize("extra", [{"extra_body": {"strictcall": {"reasoning_budget": 8}}},
                                   {"reasoning_effort": "none"}], ids=["think-8", "no-think"])
def test_qwen_calls_through_vllm(client, extra):
    resp = client.chat.completions.create(model="q", messages=ASK, tools=[LIGHTS, ALARM],
                                          tool_choice="required", max_tokens=200, **extra)
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls"
    for call in choice.message.tool_calls:
        tool = {"set_lights": LIGHTS, "set_alarm": ALARM}[call.function.name]
        jsonschema.validate(json.loads(call.function.arguments),
                            tool["function"]["parameters"])
    thinking = "reasoning_budget" in json.dumps(extra)
    assert (choice.message.model_extra.get("reasoning_content") is not None) == thinking
    if thinking:
        assert resp.usage.completion_tokens_details.reasoning_tokens <= 8 + len("</think>")
