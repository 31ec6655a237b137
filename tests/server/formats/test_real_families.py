"""Model formats against the families' real chat templates and Qwen3's real tokenizer
(no model weights needed): `auto` places each official template; tools, earlier calls and
tool results are rendered the family's way; the Qwen grammar takes Qwen's own tokens (its
`<tool_call>` and `</think>` are single tokens) and the reader reads them back."""

from __future__ import annotations

import json

import pytest

from grammars import GrammarCache, ToolSpec, make_backend
from grammars.keywords import XGRAMMAR_KEYWORDS
from server.api.chat.translate import to_task
from server.api.chat.wire import ChatCompletionRequest
from server.formats.base import Ask, AskedTool
from server.formats.detect import detect, resolve
from server.formats.families import FamilyFormat
from tests.server.formats.real_families import TEMPLATES, qwen_tokenizer, template

WEATHER = {"type": "object", "properties": {
    "city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"]}


@pytest.fixture(scope="module")
def qwen():
    return qwen_tokenizer()


@pytest.mark.parametrize("name, family", sorted(TEMPLATES.items()))
def test_auto_places_official_templates(name, family):
    found, why = detect(template(name), None)
    assert found == family, why
    assert why


# Official templates: does a model with it think? Its family's syntax alone does not say
# (Qwen2.5, Qwen3-2507 Instruct and Hermes write Qwen3's `<tool_call>` and never think).
THINKS = {
    "Qwen-Qwen3-0.6B@a55ee1.jinja": True, "Qwen-Qwen3.5-0.8B.jinja": True,
    "Qwen-Qwen2.5-7B-Instruct.jinja": False, "Qwen-Qwen3-4B-Instruct-2507.jinja": False,
    "Qwen-Qwen3-4B-Thinking-2507.jinja": True,
    "Qwen-Qwen3-Coder-30B-A3B-Instruct.jinja": False,
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja": False,
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": True,
    "deepseek-ai-DeepSeek-V3.1.jinja": True, "openai-gpt-oss-120b.jinja": True,
    "Kimi-K2-Instruct.jinja": False, "Kimi-K2-Thinking.jinja": True, "GLM-4.6.jinja": True,
    "MiniMax-M2.jinja": True, "google-gemma-4-31B-it.jinja": True,
    "meta-llama-Llama-3.1-8B-Instruct.jinja": False,
}


@pytest.mark.parametrize("name, thinks", sorted(THINKS.items()))
def test_a_family_thinks_only_where_its_template_does(name, thinks):
    from server.formats.detect import template_thinks
    from server.formats.families import get_format

    text = template(name)
    found, _ = detect(text, None)
    fmt = get_format(found)
    assert (isinstance(fmt, FamilyFormat) and template_thinks(text, fmt)) == thinks, found


def test_resolve_logs_and_marks_template_that_renders_tools(qwen, caplog):
    caplog.set_level("INFO", logger="strictcall.formats")
    fmt = resolve("auto", model_dir=None, tokenizer=qwen)
    assert isinstance(fmt, FamilyFormat) and fmt.name == "qwen_3" and fmt.renders_tools
    assert "model format qwen_3" in caplog.text


def test_tools_history_and_results_rendered_the_qwen_way(qwen):
    req = ChatCompletionRequest.model_validate({"model": "m", "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "get_weather", "arguments": '{"city": "Paris", "unit": "celsius"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 degrees"},
        {"role": "user", "content": "And in Oslo?"}]})
    messages = FamilyFormat("qwen_3", thinks=True).messages(to_task(req).turns)
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}]
    prompt = qwen.apply_chat_template(messages, tools=tools, tokenize=False,
                                      add_generation_prompt=True, enable_thinking=True)
    assert "<tools>" in prompt and '"name": "get_weather"' in prompt
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", ' in prompt
    assert "<tool_response>\n18 degrees\n</tool_response>" in prompt
    assert prompt.endswith("<|im_start|>assistant\n")


def test_qwen_grammar_takes_qwens_own_tokens_and_the_reader_reads_them(qwen):
    backend = make_backend("xgrammar", qwen, vocab_size=len(qwen),
                           stop_token_ids=[qwen.convert_tokens_to_ids("<|im_end|>")])
    tool = AskedTool("get_weather", WEATHER,
                     ToolSpec.from_parameters("get_weather", WEATHER, table=XGRAMMAR_KEYWORDS))
    plan = FamilyFormat("qwen_3", thinks=True).render(Ask("tools", (tool,), reasoning=64))
    assert plan.prefill == "<think>\n"
    text = ('Paris, celsius.</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": '
            '{"city": "Paris", "unit": "celsius"}}\n</tool_call>')
    ids = qwen.encode(text, add_special_tokens=False)
    assert qwen.convert_tokens_to_ids("<tool_call>") in ids  # one token, as Qwen writes it
    matcher = backend.matcher(GrammarCache(backend).get(plan.spec).grammar)
    assert all(matcher.accept_token(t) for t in ids)
    # Decoding keeps Qwen's markers (added, not special), so the reader sees them.
    decoded = qwen.decode(ids, skip_special_tokens=False)
    reading = plan.reader.read(decoded, complete=True)
    assert reading.reasoning == "Paris, celsius."
    assert json.loads(reading.calls) == [
        {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}]
