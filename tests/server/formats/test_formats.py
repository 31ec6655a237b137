"""Model formats without a model: for each family StrictCall serves, the grammar built from
xgrammar's structural tag accepts the family's own call syntax (and refuses a call to a tool
that was not offered), the reader recovers reasoning, content and calls from it, also when
the text arrives in random chunks, and `auto` detection places real templates' markers."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest

from grammars import GrammarCache, JsonSchemaSpec, ToolSpec, make_backend
from grammars.keywords import XGRAMMAR_KEYWORDS
from server.formats.base import Ask, AskedTool, UnsupportedFormat
from server.formats.detect import detect
from server.formats.families import SERVED, XGRAMMAR_FAMILIES, FamilyFormat, get_format
from server.formats.reading import ReasoningMarks
from server.formats.reasoning import THINK_END
from server.formats.smollm2 import ListReader
from server.pipeline.guards.toolstream import ArgumentsFragment, CallNamed, CallScanner
from server.task import EarlierCall, Turn

WEATHER = {"type": "object", "properties": {
    "city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
    "required": ["city", "unit"]}
ADD = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
       "required": ["a", "b"]}
CALLS = [("get_weather", {"city": "Paris", "unit": "c"}), ("add", {"a": 2, "b": 3})]


def _qwen_xml(name: str, args: dict, sep: str = "\n") -> str:
    params = "".join(f"<parameter={k}>{sep}{v if isinstance(v, str) else json.dumps(v)}"
                     f"{sep}</parameter>{sep}" for k, v in args.items())
    return params


# Each family's output for CALLS, written as its chat template writes calls (thinking on).
def _family_text(family: str) -> str:
    j = [json.dumps(a) for _, a in CALLS]
    names = [n for n, _ in CALLS]
    think = "I should look it up.</think>"
    return {
        "llama": f'{{"name": "{names[0]}", "parameters": {j[0]}}}',
        "qwen_3": think + "\n\n" + "\n".join(
            f'<tool_call>\n{{"name": "{n}", "arguments": {a}}}\n</tool_call>'
            for n, a in zip(names, j, strict=False)),
        "exaone": think + "\n\n" + "\n".join(
            f'<tool_call>{{"name": "{n}", "arguments": {a}}}</tool_call>'
            for n, a in zip(names, j, strict=False)),
        "qwen_3_5": think + "\n\n" + "\n".join(
            f"<tool_call>\n<function={n}>\n{_qwen_xml(n, a).rstrip()}\n</function>\n</tool_call>"
            for n, a in CALLS),
        "deepseek_r1": think + "<｜tool▁calls▁begin｜>" + "\n".join(
            f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>{n}\n```json\n{a}\n```<｜tool▁call▁end｜>"
            for n, a in zip(names, j, strict=False)) + "<｜tool▁calls▁end｜>",
        "deepseek_v3_1": think + "<｜tool▁calls▁begin｜>" + "".join(
            f"<｜tool▁call▁begin｜>{n}<｜tool▁sep｜>{a}<｜tool▁call▁end｜>"
            for n, a in zip(names, j, strict=False)) + "<｜tool▁calls▁end｜>",
        "harmony": "<|channel|>analysis<|message|>I should look it up.<|end|>"
                   f"<|start|>assistant<|channel|>commentary to=functions.{names[0]}"
                   f"<|constrain|>json<|message|>{j[0]}<|call|>",
    }[family]


FAMILIES = ["llama", "qwen_3", "exaone", "qwen_3_5", "deepseek_r1", "deepseek_v3_1", "harmony"]
ONE_CALL = {"llama", "harmony"}  # their text above holds one call


@pytest.fixture(scope="module")
def backend(model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    return make_backend("xgrammar", tokenizer, vocab_size=len(tokenizer),
                        stop_token_ids=[tokenizer.eos_token_id])


def _ask(tools: dict[str, dict], *, reasoning: int = 0) -> Ask:
    """At least one call to `tools`."""
    return Ask("tools", tuple(
        AskedTool(n, s, ToolSpec.from_parameters(n, s, table=XGRAMMAR_KEYWORDS))
        for n, s in tools.items()), reasoning=reasoning)


def _complete(backend, spec, text: str) -> bool:
    """The grammar takes `text` as a whole answer."""
    return backend.accepts(GrammarCache(backend).get(spec).grammar, text)


def _prefix(backend, spec, text: str) -> bool:
    """The grammar lets `text` through as the start of an answer."""
    import xgrammar

    handle = GrammarCache(backend).get(spec).grammar.handle
    return bool(xgrammar.GrammarMatcher(handle).accept_string(text))


@pytest.mark.parametrize("family", FAMILIES)
def test_family_grammar_reader_and_stream(family, backend):
    fmt = get_format(family)
    plan = fmt.render(_ask({"get_weather": WEATHER, "add": ADD},
                           reasoning=64 if fmt.thinks else 0))
    text = _family_text(family)
    if not fmt.thinks:  # llama: no thinking block of its own
        assert plan.prefill == ""
    assert _complete(backend, plan.spec, text), f"{family} grammar refuses its own syntax"
    reading = plan.reader.read(text, complete=True)
    expected = CALLS[:1] if family in ONE_CALL else CALLS
    assert [(c["name"], c["arguments"]) for c in json.loads(reading.calls)] == expected
    if fmt.thinks:
        assert reading.reasoning == "I should look it up."
    # Streamed in random chunks: the scanner rebuilds the same calls from the growing text.
    rng = random.Random(family)
    scanner, fed, names, args = CallScanner(), 0, {}, {}
    cut = 0
    while cut < len(text):
        cut = min(len(text), cut + rng.randint(1, 7))
        calls = plan.reader.read(text[:cut], complete=cut == len(text)).calls or ""
        assert calls.startswith(calls[:fed])
        for event in scanner.feed(calls[fed:]):
            if isinstance(event, CallNamed):
                names[event.index] = event.name
            elif isinstance(event, ArgumentsFragment):
                args[event.index] = args.get(event.index, "") + event.text
        fed = len(calls)
    assert [(names[i], json.loads(args[i])) for i in sorted(names)] == expected


@pytest.mark.parametrize("family", ["qwen_3", "llama"])
def test_a_tool_not_offered_cannot_be_called(family, backend):
    plan = get_format(family).render(_ask({"add": ADD}))
    begin = {"qwen_3": '<tool_call>\n{"name": "', "llama": '{"name": "'}[family]
    assert _prefix(backend, plan.spec, begin + "add")
    assert not _prefix(backend, plan.spec, begin + "delete_everything")


def test_generic_reasoning_wraps_the_call_list(backend):
    plan = SERVED["smollm2"].render(_ask({"add": ADD}, reasoning=8))
    assert plan.prefill == "<think>\n" and plan.thinks
    text = 'Add them.</think>\n<tool_call>[{"name":"add","arguments":{"a":2,"b":3}}]'
    assert _complete(backend, plan.spec, text)
    reading = plan.reader.read(text, complete=True)
    assert reading.reasoning == "Add them." and json.loads(reading.calls)[0]["name"] == "add"


def test_reasoning_budget_forces_the_end_marker(backend, model_dir):
    """After `budget` free tokens the mask lets only the end marker through (xgrammar
    any_text.max_tokens), counted in tokens of the model's tokenizer."""
    import xgrammar
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    spec = JsonSchemaSpec.from_schema(ADD, table=XGRAMMAR_KEYWORDS)
    plan = SERVED["smollm2"].render(Ask("json", answer=spec, reasoning=2))
    matcher = xgrammar.GrammarMatcher(GrammarCache(backend).get(plan.spec).grammar.handle)
    bitmask = xgrammar.allocate_token_bitmask(1, len(tokenizer))

    def allowed() -> list[str]:
        matcher.fill_next_token_bitmask(bitmask)
        words = bitmask[0].tolist()
        return [tokenizer.decode([i]) for i in range(len(tokenizer))
                if (words[i // 32] >> (i % 32)) & 1]

    assert len(allowed()) > 1000  # free text
    for token in tokenizer.encode(" one two"):
        assert matcher.accept_token(token)
    assert allowed() and all("</think>".startswith(t) for t in allowed())
    for token in tokenizer.encode("</think>\n{"):
        assert matcher.accept_token(token)


def test_reading_while_the_marker_is_half_written():
    reader = ListReader("tools", ReasoningMarks(THINK_END, "\n<tool_call>"))
    assert reader.read("Thinking </thi", complete=False).thinking
    assert reader.read("Thinking </thi", complete=False).reasoning == "Thinking"
    assert reader.read("Thinking </think>\n<tool", complete=False).calls == ""
    assert reader.read('T</think>\n<tool_call>[{"na', complete=False).calls == '[{"na'


@pytest.mark.parametrize("template, model_type, expected", [
    # Markers as they appear in the families' published chat templates.
    ('{{- "<|start|>assistant<|channel|>analysis<|message|>" }}', None, "harmony"),
    ("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + "
     "tool['function']['name'] + '\\n```json\\n'", None, "deepseek_r1"),
    ("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>'+ tool['function']['name'] + "
     "'<｜tool▁sep｜>'", None, "deepseek_v3_1"),
    ("<|im_start|>{{- '<tool_call>\\n<function=' + tool_call.name + '>\\n' }}"
     "<parameter=", None, "qwen_3_coder"),
    ('<|im_start|>{{- \'<tool_call>\\n{"name": "\' }}{{- \', "arguments": \' }}</tool_call>',
     None, "qwen_3"),
    ("<|start_header_id|>assistant<|end_header_id|>{{- '<|eot_id|>' }}", None, "llama"),
    ("{% for message in messages %}<|im_start|>{{ message['content'] }}", "llama", "smollm2"),
    (None, "gpt_oss", "harmony"),
])
def test_auto_detection(template, model_type, expected):
    assert detect(template, model_type)[0] == expected


def test_unknown_formats_are_refused_by_name():
    with pytest.raises(UnsupportedFormat, match="unknown model format 'nonesuch'"):
        get_format("nonesuch")


def test_formats_served():
    # Every family xgrammar 0.2.9 ships, and StrictCall's own.
    assert set(SERVED) == {"smollm2", *XGRAMMAR_FAMILIES}
    qwen = SERVED["qwen_3"]
    assert isinstance(qwen, FamilyFormat)
    assert replace(qwen, renders_tools=False).template_kwargs(reasoning=True) \
        == {"enable_thinking": True, "thinking": True, "thinking_mode": "enabled"}


@pytest.mark.parametrize("family", ["llama", "qwen_3", "qwen_3_coder", "deepseek_v3_1"])
def test_a_template_without_tools_is_taught_the_familys_own_syntax(family, backend):
    """A family whose chat template does not render tools gets them in the system turn,
    with an example call in ITS syntax (the grammar enforces that), never SmolLM2's list."""
    fmt = replace(SERVED[family], renders_tools=False)
    rendering = fmt.render(_ask({"add": ADD}))
    instructions = rendering.instructions or ""
    assert '"name": "add"' in instructions  # the tools are listed
    assert "<tool_call>[" not in instructions and '"arguments": {"argument"' not in \
        instructions
    example = instructions.rsplit("example:\n", 1)[1]
    assert _complete(backend, rendering.spec, example), \
        f"{family}: the example {example!r} is not a call the grammar takes"


def test_earlier_calls_are_written_in_the_familys_syntax():
    turns = [Turn("user", "add 2 and 3"),
             Turn("assistant", "", (EarlierCall("call_1", "add", {"a": 2, "b": 3}),))]
    flat = replace(SERVED["qwen_3"], renders_tools=False).messages(turns)
    assert flat[1]["content"] == \
        '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'
    structured = SERVED["qwen_3"].messages(turns)  # its template renders tool_calls
    assert structured[1]["tool_calls"][0]["function"] == {"name": "add",
                                                          "arguments": {"a": 2, "b": 3}}
    smol = SERVED["smollm2"].messages(turns)
    assert smol[1]["content"] == '<tool_call>[{"name": "add", "arguments": {"a": 2, "b": 3}}]' \
        '</tool_call>'
