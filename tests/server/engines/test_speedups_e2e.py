"""The default engine's speed-ups, seen by a client of the real server: a repeated tool set
is prefilled once (usage reports the reused tokens as cached, as OpenAI does), and the
grammar's forced tokens are fed without model steps (/health counts them)."""

from __future__ import annotations

import json

import httpx
import pytest

pytestmark = pytest.mark.slow

TOOLS = [{"type": "function", "function": {
    "name": "open_ticket", "description": "Open a support ticket for a stuck access request.",
    "parameters": {"type": "object", "properties": {
        "request_id": {"type": "string", "maxLength": 12},
        "urgency": {"enum": ["low", "normal", "urgent"]}},
        "required": ["request_id", "urgency"]}}}]


def test_a_repeated_tool_set_is_cached_and_forced_tokens_skip_model_steps(live_server, live_client):
    before = httpx.get(f"{live_server}/health").json()["engine"]
    answers = [live_client.chat.completions.create(
        model="smollm2-135m-instruct", tools=TOOLS, tool_choice="required",
        messages=[{"role": "user", "content": f"Request {n} is stuck, open an urgent ticket."}])
        for n in ("AR-17", "AR-18")]
    after = httpx.get(f"{live_server}/health").json()["engine"]
    for answer in answers:
        call = answer.choices[0].message.tool_calls[0]
        assert call.function.name == "open_ticket"
        assert set(json.loads(call.function.arguments)) == {"request_id", "urgency"}
    second = answers[1].usage
    assert 0 < second.prompt_tokens_details.cached_tokens < second.prompt_tokens
    assert after["prefix_hits"] > before["prefix_hits"]
    assert after["jump_forward_tokens"] > before["jump_forward_tokens"]
