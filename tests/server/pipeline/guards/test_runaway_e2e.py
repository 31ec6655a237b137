"""Runaway guards through the real server on the embedded model: a BFCL question whose
forced call loops inside a string value (greedy SmolLM2-135M writes
"deer_population.deer_population..." for a location) is stopped early with
finish_reason "length" and a note, and runs to max_tokens with the guard off.
(The model did not repeat whole calls on any prompt tried; the duplicate-call guard is
tested over the same app with a scripted engine, tests/server/pipeline/test_runaway.py.)

The server here runs without jump-forward: with it, the grammar's forced keys arrive as
fewer, longer tokens and the same greedy model writes "deer" and closes the call (seen on
both engines), so the loop to guard against only shows in the model's own tokenization.
It also waits for xgrammar on the cold compile (--cold-compile wait): with the bridge, a
compile slower than --bridge-wait-s on a loaded machine is served by llguidance's mask,
and the greedy model took another path there once (a CI run's call closed, no loop)."""

from __future__ import annotations

import pytest

from bench.accuracy.bfcl_ast import load
from server.process import ServerProcess
from tests.conftest import evaldata
from tests.live import MODEL

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def client(model_dir):
    from openai import OpenAI

    with ServerProcess("--model", str(model_dir), "--served-model-name", MODEL,
                       "--no-jump-forward", "--cold-compile", "wait") as proc, OpenAI(
            base_url=f"{proc.base_url}/v1", api_key="unused", max_retries=0,
            timeout=300) as client:
        yield client


@pytest.fixture(scope="module")
def looping_question():
    evaldata("bfcl/BFCL_v4_multiple.json")  # skips without it (fails in CI)
    evaldata("bfcl/possible_answer/BFCL_v4_multiple.json")
    found = [q for q, _ in load("multiple", 20) if q["id"] == "multiple_7"]
    assert found, "BFCL multiple_7 is not among the first 20 of BFCL_v4_multiple.json"
    return found[0]


def _ask(client, question, loop_guard: str):
    return client.chat.completions.create(
        model=MODEL, messages=question["question"][0], max_tokens=200, temperature=0,
        tools=[{"type": "function", "function": f} for f in question["function"]],
        tool_choice="required", extra_body={"strictcall": {"loop_guard": loop_guard}})


def test_a_looping_value_is_cut_early(client, looping_question):
    guarded = _ask(client, looping_question, "stop")
    choice = guarded.choices[0]
    assert choice.finish_reason == "length" and not choice.message.tool_calls
    cut = guarded.model_extra["strictcall"]["runaway"]["loop_cut"]
    assert cut["kind"] == "value" and cut["repeats"] >= 4
    assert guarded.usage.completion_tokens < 120  # well before max_tokens
    unguarded = _ask(client, looping_question, "off")
    assert unguarded.choices[0].finish_reason == "length"
    assert unguarded.usage.completion_tokens == 200
