"""Prompt-lookup speculation leaves greedy output unchanged: the same BFCL questions (forced
tool calls, the grammar on) against a real server on the embedded model with drafts off and
on; the calls must be identical token for token, and the drafting server must have drafted
and kept some drafts (its /health counters say so)."""

from __future__ import annotations

import httpx
import openai
import pytest

from bench.accuracy.bfcl_ast import described, load
from server.process import ServerProcess

pytestmark = [pytest.mark.slow, pytest.mark.long]

MODEL = "m"
QUESTIONS = [q for category in ("simple_python", "multiple", "parallel")
             for q, _ in load(category, limit=2)]


def calls(model_dir, *flags: str) -> tuple[list[tuple], dict]:
    """Each question's tool calls and text (greedy, tool_choice=required) and the engine's
    counters afterwards, from a fresh server started with `flags`."""
    with ServerProcess("--model", str(model_dir), "--served-model-name", MODEL,
                       "--max-batch", "1", *flags) as proc:
        client = openai.OpenAI(base_url=f"{proc.base_url}/v1", api_key="unused",
                               max_retries=0, timeout=300)
        answers = []
        for question in QUESTIONS:
            tools = [{"type": "function", "function": f}
                     for f in described(question["function"])]
            reply = client.chat.completions.create(
                model=MODEL, messages=question["question"][0], tools=tools,
                tool_choice="required", temperature=0, max_tokens=256)
            message = reply.choices[0].message
            answers.append((reply.choices[0].finish_reason, message.content,
                            [(c.function.name, c.function.arguments)
                             for c in message.tool_calls or []]))
        client.close()
        return answers, httpx.get(f"{proc.base_url}/health").json()["engine"]


def test_drafts_change_no_greedy_call_on_bfcl_questions(model_dir):
    plain, plain_stats = calls(model_dir, "--speculate-tokens", "0")
    # --draft-cost 0: draft as far as the prompt allows, whatever a drafted token costs here
    drafted, stats = calls(model_dir, "--speculate-tokens", "8", "--draft-cost", "0")
    assert plain_stats["draft_tokens"] == 0
    assert drafted == plain
    assert stats["draft_tokens"] > 0 and stats["draft_accepted"] > 0
    # Kept drafts are model steps saved.
    assert stats["decode_steps"] < plain_stats["decode_steps"]


def test_the_server_measures_what_a_draft_costs_and_drafts_only_where_it_pays(model_dir):
    _, stats = calls(model_dir)
    assert stats["draft_cost_pct"] >= 0  # measured at start-up on this machine
    if stats["draft_cost_pct"] >= 100:  # a drafted token costs a step or more: none pay
        assert stats["draft_tokens"] == 0
