"""POST /v1/messages with `thinking` over a ScriptedEngine: the reasoning pass as a thinking
block first (plain and streamed), how `thinking` sets the reasoning budget, and thinking
blocks of earlier turns dropped. The smollm2 format's reasoning: the prompt opens `<think>`,
the scripted model closes it."""

from __future__ import annotations

import json

import pytest
from anthropic.types import Message
from fastapi.testclient import TestClient

from server.api.app import create_app
from server.api.messages.translate import to_task
from server.api.messages.wire import MessagesRequest
from server.engines.scripted import ScriptedEngine
from server.settings import Settings
from tests.server.api.test_messages_api import (
    PARIS,
    ROUND_TRIP,
    USER,
    WEATHER,
    Script,
    accumulate,
    assert_blocks_run_one_after_another,
    create,
    message,
    stream_events,
)


@pytest.fixture()
def script():
    return Script()


@pytest.fixture()
def client(scripted, script):
    with scripted(script) as c:
        yield c


THOUGHT = "Paris is in France."
THINK = {"type": "enabled", "budget_tokens": 32}


def test_thinking_block_comes_first(client, script):
    script.text = f"{THOUGHT}</think>\nSunny."
    body = message(create(client, thinking=THINK))
    assert body["content"] == [{"type": "thinking", "thinking": THOUGHT, "signature": ""},
                               {"type": "text", "text": "Sunny."}]
    Message.model_validate(body)  # the anthropic SDK's own model takes the empty signature
    assert client.app.state.pipeline.engine.prompts[-1].endswith("<think>\n")


def test_thinking_before_a_tool_use(client, script):
    script.text = f"{THOUGHT}</think>\n<tool_call>{PARIS}"
    body = message(create(client, thinking=THINK, tools=[WEATHER],
                          tool_choice={"type": "any"}))
    assert [b["type"] for b in body["content"]] == ["thinking", "tool_use"]
    assert body["content"][1]["input"] == {"city": "Paris"}
    assert body["stop_reason"] == "tool_use"


def test_thinking_display_omitted_leaves_the_text_out(client, script):
    script.text = f"{THOUGHT}</think>\nSunny."
    body = message(create(client, thinking={**THINK, "display": "omitted"}))
    assert body["content"][0] == {"type": "thinking", "thinking": "", "signature": ""}


@pytest.mark.parametrize(("thinking", "strictcall", "budget"), [
    (THINK, None, 32), ({"type": "disabled"}, None, 0), ({"type": "adaptive"}, None, None),
    (None, None, None), (THINK, {"reasoning_budget": 5}, 5),  # the extension wins
    ({"type": "disabled"}, {"max_repair_attempts": 1}, 0)])
def test_thinking_translates_to_the_reasoning_budget(thinking, strictcall, budget):
    task = to_task(MessagesRequest.model_validate({
        "model": "m", "max_tokens": 64, "messages": USER, "thinking": thinking,
        "strictcall": strictcall}))
    assert task.options.reasoning_budget == budget
    if strictcall:
        assert task.options.model_dump(exclude_none=True).items() >= strictcall.items()


def test_thinking_by_default_and_disabled(model_dir, script):
    """A server that thinks by default (--reasoning): adaptive keeps it, disabled turns it
    off."""
    settings = Settings(served_model_name="scripted", reasoning=16)
    with TestClient(create_app(settings, lambda s: ScriptedEngine(model_dir, script))) as c:
        script.text = f"{THOUGHT}</think>\nSunny."
        body = message(create(c, thinking={"type": "adaptive"}))
        assert [b["type"] for b in body["content"]] == ["thinking", "text"]
        script.text = "Sunny."
        body = message(create(c, thinking={"type": "disabled"}))
        assert body["content"] == [{"type": "text", "text": "Sunny."}]


def test_thinking_blocks_sent_back_are_dropped(client, script):
    script.text = "It is 18C and sunny."
    turns = json.loads(json.dumps(ROUND_TRIP))
    turns[1]["content"][:0] = [{"type": "thinking", "thinking": "SECRET", "signature": ""},
                               {"type": "redacted_thinking", "data": "opaque"}]
    message(create(client, messages=turns, tools=[WEATHER]))
    prompt = client.app.state.pipeline.engine.prompts[-1]
    assert "SECRET" not in prompt and "opaque" not in prompt and "Let me check." in prompt


# -- streaming --------------------------------------------------------------------------

def test_stream_thinking_then_text(client, script):
    script.text = f"{THOUGHT}</think>\nSunny and warm."
    events = stream_events(create(client, stream=True, thinking=THINK))
    assert_blocks_run_one_after_another(events)
    starts = [e["content_block"] for e in events if e["type"] == "content_block_start"]
    assert starts[0] == {"type": "thinking", "thinking": "", "signature": ""}
    deltas = [e["delta"]["type"] for e in events if e["type"] == "content_block_delta"
              and e["index"] == 0]
    assert deltas[:-1] == ["thinking_delta"] * (len(deltas) - 1) and len(deltas) > 2
    assert deltas[-1] == "signature_delta"
    final = accumulate(events)
    assert [b.type for b in final.content] == ["thinking", "text"]
    assert (final.content[0].thinking, final.content[0].signature) == (THOUGHT, "")
    assert final.content[1].text == "Sunny and warm."


def test_stream_thinking_then_tool_use(client, script):
    script.text = f"{THOUGHT}</think>\n<tool_call>{PARIS}"
    events = stream_events(create(client, stream=True, thinking=THINK, tools=[WEATHER],
                                  tool_choice={"type": "any"}))
    assert_blocks_run_one_after_another(events)
    final = accumulate(events)
    assert [b.type for b in final.content] == ["thinking", "tool_use"]
    assert final.content[0].thinking == THOUGHT and final.content[1].input == {"city": "Paris"}


def test_stream_cut_off_while_thinking(client, script):
    script.text = f"{THOUGHT}</think>\nSunny."
    events = stream_events(create(client, stream=True, max_tokens=4,
                                  thinking={"type": "enabled", "budget_tokens": 3}))
    assert_blocks_run_one_after_another(events)
    final = accumulate(events)
    assert [b.type for b in final.content] == ["thinking"]
    assert final.stop_reason == "max_tokens"
