"""Every family xgrammar 0.2.9 ships, without a model: what the family's grammar writes
(a random walk through it, many outputs each) is read back, plain and streamed in random
chunks, into calls whose arguments are valid under their tools' schemas; calls written in
the family's syntax (for templates without tools, for repair prompts) are ones its grammar
takes and its reader reads back as they were; a runaway guard's cut leaves a complete
answer."""

from __future__ import annotations

import json
import random

import jsonschema
import pytest

from server.formats.families import XGRAMMAR_FAMILIES, FamilyFormat, get_format, write_calls
from server.formats.reasoning import THINK_INSTRUCTIONS
from tests.server.formats.cases import (
    CALLS,
    ONE_CALL,
    REASONING,
    TOOLS,
    accepts,
    ask,
    closers,
    markers,
    render,
    streamed,
)
from tests.server.formats.walk import GrammarWalk

FAMILIES = sorted(XGRAMMAR_FAMILIES)


def _thinks(family: str) -> bool:
    return get_format(family).thinks


def _first_syntax(syntax) -> dict:
    """Each tool's first call syntax (harmony has several per tool)."""
    out: dict = {}
    for call in syntax.calls:
        out.setdefault(call.tool, call)
    return out


def _check_calls(calls_text: str | None) -> list[dict]:
    calls = json.loads(calls_text or "[]")
    for call in calls:
        jsonschema.validate(call["arguments"], TOOLS[call["name"]])
    return calls


@pytest.mark.parametrize("mode, max_calls", [("tools", None), ("tools", 1), ("auto", None)])
@pytest.mark.parametrize("family", FAMILIES)
def test_grammar_output_reads_back_valid_plain_and_streamed(family, mode, max_calls):
    """A forced answer holds a call in every family, one call or several (harmony's tag
    from xgrammar let it hold none: server/formats/rewrites.py)."""
    plan = render(family, mode, reasoning=_thinks(family), max_calls=max_calls)
    walk = GrammarWalk(markers(plan.reader.syntax), closers(plan.reader.syntax))
    seen_calls = 0
    for seed in range(4):
        text = walk.run(plan.spec.tag, random.Random(f"{family}{mode}{seed}"), steps=900)
        reading = plan.reader.read(text, complete=True)
        calls = _check_calls(reading.calls)
        if mode == "tools":
            assert calls, f"{family}: a forced answer read as no call: {text!r}"
            assert max_calls is None or len(calls) == 1, text
        seen_calls += len(calls)
        if calls:
            assert streamed(plan.reader, text, f"{family}{seed}") == \
                [(c["name"], c["arguments"]) for c in calls], text
        if _thinks(family):
            assert reading.reasoning is not None
    assert seen_calls or mode == "auto"


# (harmony's reasoning and each call are messages of their own:
# tests/server/formats/test_formats.py)
@pytest.mark.parametrize("family", sorted(set(FAMILIES) - {"harmony"}))
def test_calls_written_in_the_familys_syntax_are_its_grammars_and_read_back(family):
    plan = render(family, reasoning=_thinks(family))
    syntax = plan.reader.syntax
    expected = CALLS[:1] if family in ONE_CALL else CALLS
    by_tool = _first_syntax(syntax)
    written = write_calls(syntax, [(by_tool[n], a) for n, a in expected])
    opening = (syntax.think_begin or "") + REASONING + (syntax.think_end or "") \
        + syntax.think_then if _thinks(family) else syntax.preamble
    text = opening + written
    assert accepts(plan.spec.tag, text), f"{family}: its grammar refuses {text!r}"
    reading = plan.reader.read(text, complete=True)
    assert [(c["name"], c["arguments"]) for c in json.loads(reading.calls)] == expected
    assert streamed(plan.reader, text, family) == expected
    if _thinks(family):
        assert reading.reasoning == REASONING


@pytest.mark.parametrize("family", sorted(set(FAMILIES) - ONE_CALL - {"harmony"}))
def test_a_runaway_cut_keeps_a_complete_answer(family):
    plan = render(family, reasoning=False)
    syntax = plan.reader.syntax
    by_tool = _first_syntax(syntax)
    text = syntax.preamble + write_calls(syntax, [(by_tool[n], a) for n, a in CALLS])
    cut = plan.reader.cut_after(text, 1)
    assert json.loads(plan.reader.read(cut, complete=True).calls) == \
        [{"name": CALLS[0][0], "arguments": CALLS[0][1]}]
    assert cut.endswith(syntax.calls_end + syntax.tail)


@pytest.mark.parametrize("family", ["gemma_4", "glm_4_7", "cohere"])
def test_a_tool_name_that_begins_another_is_not_named_early(family):
    """`get` and `get_weather`: while the header could still be either, no name goes out."""
    plan = render(family)
    by_tool = _first_syntax(plan.reader.syntax)
    text = plan.reader.syntax.preamble + write_calls(
        plan.reader.syntax, [(by_tool["get_weather"], CALLS[0][1])])
    head = text.index(by_tool["get"].begin) + len(by_tool["get"].begin)
    if by_tool["get"].index is not None:  # Cohere: the name follows the number
        head = text.index('name="get') + len('name="get')
    assert plan.reader.read(text[:head], complete=False).calls in ("[", None)
    assert json.loads(plan.reader.read(text, complete=True).calls)[0]["name"] == "get_weather"


def test_a_format_serves_its_templates_way_of_thinking():
    """The opening the grammar expects from the prompt: each family's own marker."""
    prefills = {name: get_format(name).render(ask(reasoning=8)).prefill
                for name in ("minimax_m3", "kimi_k3", "cohere", "glm_4_7", "gemma_4")}
    assert prefills == {"minimax_m3": "<mm:think>", "kimi_k3": "<|open|>think<|sep|>",
                        "cohere": "<|START_THINKING|>", "glm_4_7": "<think>\n",
                        "gemma_4": ""}
    assert isinstance(get_format("minimax_m3"), FamilyFormat)
    assert get_format("minimax_m3").template_kwargs(reasoning=True)["thinking_mode"] == \
        "enabled"


@pytest.mark.parametrize("reasoning", [0, 8])
@pytest.mark.parametrize("family", FAMILIES)
def test_a_template_without_tools_is_shown_an_answer_its_grammar_takes(family, reasoning):
    """The system turn's example, for templates that do not render tools, is what the
    model writes after the prompt's end, in the family's own syntax: where the family
    thinks, its reasoning block (less what the prompt opens) with a thought in it, then the
    calls; the forced grammar takes it as a whole answer."""
    from dataclasses import replace

    fmt = replace(get_format(family), renders_tools=False)
    rendering = fmt.render(ask(tools={"get_weather": TOOLS["get_weather"]},
                               reasoning=reasoning))
    example = (rendering.instructions or "").rsplit("example:\n", 1)[1] \
        .removesuffix(f"\n\n{THINK_INSTRUCTIONS}")
    assert '"name": "get_weather"' in (rendering.instructions or "")
    syntax = rendering.reader.syntax
    if reasoning and not fmt.thinks:  # StrictCall's <think> segment, asked for in words
        assert "</think>" in (rendering.instructions or "")
        example = f"{REASONING}</think>\n{example}"
    written = example if reasoning else syntax.preamble + example  # (MiniMax's, first)
    assert accepts(rendering.spec.tag, written), example
    reading = rendering.reader.read(written, complete=True)
    assert [c["name"] for c in json.loads(reading.calls or "[]")] == ["get_weather"]
    if reasoning and fmt.thinks:
        assert reading.reasoning == "I should call get_weather with the values in the question."


@pytest.mark.parametrize("family", FAMILIES)
def test_an_earlier_call_is_written_as_the_model_writes_it(family):
    """Where the template does not render tools, an earlier turn's calls are text in the
    family's syntax: the whole answer, from the block Kimi K3's prompt opens, its text in
    that block, as the model writes one after that opening."""
    from dataclasses import replace

    from server.task import EarlierCall, Turn

    fmt = replace(get_format(family), renders_tools=False)
    rendering = fmt.render(ask(tools={"get_weather": TOOLS["get_weather"]}))
    call = EarlierCall("c1", "get_weather", CALLS[0][1])
    syntax = rendering.reader.syntax
    text = "Checking." if rendering.prefill else ""  # text goes in a block where there is one
    turns = [Turn("user", "Weather?"), Turn("assistant", text, (call,))]
    written = fmt.messages(turns)[1]["content"]
    assert written.startswith(rendering.prefill + text)
    answer = syntax.preamble + written[len(rendering.prefill):]
    assert accepts(rendering.spec.tag, answer), written
    reading = rendering.reader.read(answer, complete=True)
    assert json.loads(reading.calls or "[]") == [{"name": "get_weather",
                                                  "arguments": CALLS[0][1]}]


def test_a_reasoning_off_answer_opens_the_block_its_grammar_starts_inside():
    """Kimi K3's grammar without reasoning starts inside the response block that its
    generation prompt opens: the prompt writes the opening, so the model sees the block it
    is in (without it, the embedded model wrote free text there to max_tokens); other
    families start outside any block."""
    prefills = {name: get_format(name).render(ask()).prefill for name in FAMILIES}
    assert prefills.pop("kimi_k3") == "<|open|>response<|sep|>"
    assert set(prefills.values()) == {""}


BOUNDED = {"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 20},
    "when": {"type": "string", "format": "date"},
    "code": {"type": "string", "pattern": "^[A-Z]+$"},
    "name": {"type": "string", "minLength": 2},
    "days": {"type": "integer", "minimum": 1, "maximum": 7}}, "required": ["city", "days"]}
VALID = {"city": "Paris", "when": "2026-12-02", "code": "CDG", "name": "Jo", "days": 3}
# Arguments that break one keyword each (a length beside a pattern is the validator's in
# every family: grammars/keywords/_strings.py).
BROKEN = {"city/maxLength": {"city": "x" * 25}, "when/format": {"when": "soon"},
          "code/pattern": {"code": "cdg"}, "name/minLength": {"name": "J"}}
LATE = {"minimax_m3": set(BROKEN), "gemma_4": {"city/maxLength", "name/minLength"},
        "kimi_k3": {"city/maxLength", "name/minLength"}, "qwen_3_5": {"name/minLength"},
        "qwen_3_coder": {"name/minLength"}}


@pytest.mark.parametrize("family", FAMILIES)
def test_a_string_keyword_is_held_by_the_mask_or_reported_as_checked_late(family):
    """Where xgrammar 0.2.9 does not hold a string keyword in a family's mask (MiniMax M3's
    XML refuses a pattern, a format or a length beside its namespace-marker exclusion;
    Gemma 4's and Kimi K3's ignore a length beside their marker exclusions, with a warning
    only; Qwen3.5's and Qwen3-Coder's XML takes a value below minLength), it is taken out,
    left to the validator and named with why; every other keyword is the mask's: its
    grammar refuses arguments that break it."""
    rendering = get_format(family).render(ask(tools={"get_weather": BOUNDED}))
    syntax = rendering.reader.syntax
    late = dict(rendering.checked_late)
    assert set(late) == {f"get_weather#/properties/{k}" for k in LATE.get(family, ())}
    for keyword, broken in BROKEN.items():
        written = syntax.preamble + write_calls(syntax, [(_first_syntax(syntax)["get_weather"],
                                                          {**VALID, **broken})])
        held = f"get_weather#/properties/{keyword}" not in late
        assert accepts(rendering.spec.tag, written) != held, (keyword, written)
    schemas = json.dumps([n["json_schema"] for n in _nodes(json.loads(rendering.spec.tag))
                          if n.get("type") == "json_schema"])
    for pointer, why in late.items():
        assert "checked after decoding" in why
        assert f'"{pointer.rsplit("/", 1)[1]}"' not in schemas, pointer  # out of the grammar
    assert '"maximum": 7' in schemas


def _nodes(node):
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _nodes(value)
    elif isinstance(node, list):
        for value in node:
            yield from _nodes(value)


def test_the_enforcement_report_says_which_keywords_minimax_m3_checks_late(scripted):
    fmt = get_format("minimax_m3")
    syntax = fmt.syntax([("get_weather", BOUNDED)])
    reply = syntax.preamble + write_calls(syntax, [(syntax.calls[0], {"city": "Paris",
                                                                      "days": 3})])
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": BOUNDED}}
    with scripted(lambda prompt: reply, model_format="minimax_m3", reasoning=0) as client:
        resp = client.post("/v1/chat/completions", json={
            "model": "scripted", "tools": [tool], "tool_choice": "required",
            "messages": [{"role": "user", "content": "Weather in Paris for 3 days?"}]})
    assert resp.status_code == 200, resp.text
    call = resp.json()["choices"][0]["message"]["tool_calls"][0]["function"]
    assert json.loads(call["arguments"]) == {"city": "Paris", "days": 3}
    summary = resp.headers["x-strictcall-enforcement"]
    assert "validator: maxLength@get_weather#/properties/city" in summary, summary


CALLS_AS_TEXT = [
    '{"name": "get_weather", "arguments": {"city": "Oslo"}}',
    '```json\n{\n  "name" : "get_weather",\n  "arguments"  : {"city": "Oslo"}\n}\n```',
    "{'name': 'get_weather', 'arguments': {'city': 'Oslo'}}",
    '```json\n{\n  name: "get_weather",\n  arguments: {city: "Oslo"}\n}\n```',
    '("{\\"name\\": \\"get_weather\\", \\"arguments\\": {\\"city\\": \\"Oslo\\"}}")',
    'Sure: {"name": "get_weather", "arguments": {"city": "Oslo"}}',
    'Calling it: ("{\\"name\\": \\"get_weather\\"}")']
QWEN_MARKERS_AS_TEXT = ['Here it is:\n<tool_response name="get_weather" city="Oslo">',
                        "Done.</tool_response>", "Done.</tool_call>"]


@pytest.mark.parametrize("family", FAMILIES)
def test_auto_text_holds_no_call_written_as_text(family):
    """In "auto" a call is the family's syntax under its grammar or nothing: each way the
    Qwen2.5 models were seen writing a call into the text is refused, plain text and a
    call in the format are taken."""
    rendering = render(family, "auto")
    tag = rendering.spec.tag
    if family not in ("harmony", "kimi_k3", "minimax"):  # (their text is in their blocks)
        assert accepts(tag, "The weather in Oslo is sunny, 21 C."), family
    for text in CALLS_AS_TEXT + (QWEN_MARKERS_AS_TEXT if family == "qwen_3" else []):
        if text not in OPENED or not _opens_json(family):
            assert not accepts(tag, text), (family, text)


@pytest.mark.parametrize("family", ["qwen_3", "llama", "deepseek_v3_1", "gemma_4"])
def test_an_answer_that_opens_with_a_call_does_not_write_it_again_as_a_code_block(family):
    """The 0.5B on BFCL's multi-turn: `<tool_call>{...}</tool_call>` and then the same call
    in a ```json block as the answer's text. After an opening call: more calls, and text
    (Gemma 4 writes content after its calls), but no code block."""
    plan = render(family, "auto")
    syntax = plan.reader.syntax
    call = syntax.preamble + write_calls(syntax, [(_first_syntax(syntax)["get_weather"],
                                                   CALLS[0][1])])
    assert accepts(plan.spec.tag, call), family
    assert accepts(plan.spec.tag, call + "\nDone."), family
    for again in ('```json\n{\n  name: "get_weather",\n  arguments: {city: "Oslo"}\n}\n```',
                  "\nHere:\n```\nget_weather(city='Oslo')\n```"):
        assert not accepts(plan.spec.tag, call + again), (family, again)


_OSLO = '{"name": "get_weather", "arguments": {"city": "Oslo", "days": 2, "unit": "celsius"}}'
OPENED = [_OSLO, f"```json\n{_OSLO}\n```"]


def _opens_json(family: str) -> bool:
    from server.formats.rewrites import json_opened

    calls = render(family, "tools").reader.syntax.calls
    return any(json_opened(c.begin, c.end) for c in calls)


@pytest.mark.parametrize("family", FAMILIES)
def test_auto_reads_a_call_opened_by_its_json_object_as_the_call(family):
    """The 0.5B, meaning a call in "auto", writes its JSON object without `<tool_call>`:
    where the family's call holds that object, the answer may open with it (bare or in a
    ```json block), under the grammar, and it is read as the call; elsewhere it is refused
    (the test above)."""
    if not _opens_json(family):
        pytest.skip(f"{family}'s call holds no JSON object after an opener")
    rendering = render(family, "auto")
    for text in OPENED:
        assert accepts(rendering.spec.tag, text), (family, text)
        reading = rendering.reader.read(text, complete=True)
        assert json.loads(reading.calls or "[]") == [json.loads(_OSLO)], (family, text)
        assert not (reading.content or "").strip(), (family, reading.content)
    assert not accepts(rendering.spec.tag, _OSLO.replace('"days": 2', '"days": 20')), family


@pytest.mark.parametrize("family", ["qwen_3", "llama", "hermes"] if "hermes" in FAMILIES
                         else ["qwen_3", "llama"])
def test_the_answer_after_a_dropped_repeat_holds_no_call_written_as_text(family):
    """In an agent loop, a repeat of an answered call is dropped and the answer alone is
    decoded (`Rendering.fallback`). The 0.5B, shown the weather result, wrote the same call
    again there as bare JSON text (the real-model tier's agent loop); that text is refused
    now, and an answer in words is taken."""
    from dataclasses import replace

    from server.formats.families import get_format
    from server.task import EarlierCall
    from tests.server.formats.cases import ask

    earlier = (EarlierCall("call_0", "get_weather", {"city": "Oslo", "days": 2,
                                                      "unit": "celsius"}),)
    rendering = get_format(family).render(replace(ask("auto"), answered_calls=earlier))
    assert rendering.fallback is not None and rendering.fallback.spec is not None
    tag = rendering.fallback.spec.tag
    assert accepts(tag, "It is sunny in Oslo, 21 C."), family
    assert not accepts(tag, _OSLO), family
    assert not accepts(tag, f"```json\n{_OSLO}\n```"), family
