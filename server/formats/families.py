"""xgrammar's built-in model families: how each is prompted, what its output grammar is and
how its output reads, from `xgrammar.get_model_structural_tag` (server/formats/syntax.py).
The reasoning pass is part of a rendering: the family's own thinking block where it has
one, StrictCall's `<think>` segment otherwise. The registry of served formats (StrictCall's
own `smollm2` among them) is at the end."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from grammars import StructuralTagSpec
from server.formats.base import Ask, ModelFormat, Rendering, UnsupportedFormat
from server.formats.history import flattened, structured
from server.formats.instructions import tool_lines
from server.formats.reading import Mode
from server.formats.reasoning import (
    THINK_END,
    THINK_OPEN,
    json_element,
    reasoned,
    think_instructions,
    with_budget,
)
from server.formats.rewrites import (
    MESSAGE_LISTS,
    calls_only,
    json_opened,
    no_calls_in_text,
    text_first_not_json,
    text_without_calls,
    tight,
)
from server.formats.smollm2 import NAME as GENERIC
from server.formats.smollm2 import SmolLM2Format
from server.formats.string_bounds import left_late
from server.formats.syntax import (
    READ_STYLES,
    CallSyntax,
    FamilySyntax,
    family_syntax,
    function_tool,
    structural_tag,
)
from server.formats.tag_reader import TagReader, write_call
from server.task import EarlierCall, Turn

# xgrammar 0.2.9's built-in families (`xgrammar.builtin_structural_tag`).
XGRAMMAR_FAMILIES = ("llama", "qwen_3", "qwen_3_5", "qwen_3_coder", "deepseek_r1",
                     "deepseek_v3_1", "deepseek_v3_2", "deepseek_v4", "harmony", "glm_4_7",
                     "gemma_4", "kimi", "kimi_k3", "minimax", "minimax_m3", "cohere",
                     "exaone", "mimo")
# What stands between two calls where the family's calls sit in free text (xgrammar's
# triggered tags let any text run there): what the family's chat template writes between
# them (tests/server/formats/test_templates.py checks each against the template). The
# grammar of a forced call writes it, and so does an earlier call written as text.
BETWEEN_CALLS = {"glm_4_7": "", "gemma_4": "", "mimo": ""}
# Markers of a family's calls and tool results that its "auto" answer's text never holds
# (Qwen2.5-0.5B wrote `</tool_response>` after a result, `</tool_call>` alone in text, and
# `<tool_response name="post_tweet" ...>` on BFCL's multi-turn: the tag's prefix is out).
TEXT_EXCLUDES = {"qwen_3": ("</tool_call>", "<tool_response", "</tool_response")}
# The system turn for a family whose chat template does not render tools: the tools, and
# how a call is written in the family's own syntax (the grammar enforces that syntax).
FAMILY_TOOLS_INSTRUCTIONS = """You are given a question and a set of tools. When a tool \
answers the question, call it with argument values taken from the question.
Tools:
{tools}
Write each call exactly like this example:
{example}"""


def tool_instructions(ask: Ask, syntax: FamilySyntax, *, opening: str = "") -> str:
    """The tools and an example call in `syntax`, which holds one call syntax per tool.
    The example is what the model writes after the prompt's end (`opening`, then the
    calls): the embedded model copies it from its start. Shown Kimi K3's answer from the
    response block's opening, which the prompt had already written, it wrote that
    opening's `<|open|` (which the block may not hold) again and again to max_tokens."""
    first = ask.tools[0]
    shown = first.prompt_schema  # not the grammar's: no grounded value in the prompt
    properties = shown.get("properties") or {}
    example = {name: _example_value(properties[name])
               for name in shown.get("required") or list(properties)[:1]
               if name in properties}
    call = next(c for c in syntax.calls if c.tool == first.name)
    return FAMILY_TOOLS_INSTRUCTIONS.format(
        tools=tool_lines([t.described() for t in ask.tools]),
        example=opening + write_calls(syntax, [(call, example)]))


# The reasoning in the example answer of a family that thinks, where the prompt describes
# the tools. Shown the calls only, the embedded model copied them into its reasoning
# block from their start (Kimi K3's `<|close|>response<|sep|><|open|>tools`, whose
# markers that block may not hold: `response<|sep|><|open|:` over and over) until the
# budget closed it, and went on with them in its response block to max_tokens.
EXAMPLE_THOUGHT = "I should call {tool} with the values in the question."


def _opening(syntax: FamilySyntax, tool: str) -> str:
    """What a family that thinks writes before its calls to `tool`, after the prompt's
    end: its reasoning block (less what the prompt opens) with a thought in it."""
    thought = EXAMPLE_THOUGHT.format(tool=tool)
    return f"{syntax.think_begin or ''}{thought}{syntax.think_end}{syntax.think_then}"


def _example_value(schema: Any) -> Any:
    kind = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(schema, dict) and isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    return {"integer": 1, "number": 1.5, "boolean": True, "array": [],
            "object": {}}.get(kind if isinstance(kind, str) else "", "value")


def write_calls(syntax: FamilySyntax, calls: Sequence[tuple[CallSyntax, Any]]) -> str:
    """An answer of these calls (each call's syntax and arguments) in the family's syntax,
    as its grammar writes it: after what the prompt opens (`answer_open`, with which an
    earlier turn in the history starts)."""
    written = syntax.separator.join(write_call(call, arguments, index)
                                    for index, (call, arguments) in enumerate(calls))
    return f"{syntax.calls_begin}{written}{syntax.calls_end}{syntax.tail}"


@dataclass(frozen=True)
class FamilyFormat:
    """One of xgrammar's built-in families."""

    name: str
    thinks: bool
    skip_special_tokens: bool = False  # markers may be special tokens: the reader needs them
    renders_tools: bool = True  # set from the model's chat template at startup

    def render(self, ask: Ask) -> Rendering:
        if ask.mode in ("text", "json"):
            return self._answer(ask)
        think = ask.reasoning > 0
        auto = ask.mode == "auto"
        tools = [(t.name, _keys_in_template_order(self.name, t.schema)) for t in ask.tools]
        tools, late = self._string_bounds_left_late(tools)
        own_think = think and self.thinks
        parallel = ask.max_calls is None or ask.max_calls > 1
        tag = tight(structural_tag(self.name, [function_tool(n, s) for n, s in tools],
                                   tool_choice="auto" if auto else "required",
                                   reasoning=own_think, parallel=parallel))
        syntax = self.syntax(tools)
        if auto:
            tag = text_first_not_json(no_calls_in_text(tag, TEXT_EXCLUDES.get(self.name, ())))
        if not auto:
            if own_think and tag["format"]["type"] in MESSAGE_LISTS:
                # Harmony: the reasoning message, then the calls' messages after the
                # separator, which the forced grammar writes.
                syntax = replace(syntax, think_then=syntax.separator)
            tag = calls_only(tag, syntax.separator, parallel=parallel)
        # Reasoning off: the block the grammar starts inside is opened in the prompt, as the
        # family's generation prompt does (Kimi K3's response block); a model never shown
        # its opening writes free text there and never closes it.
        prefill = syntax.answer_open
        if own_think:
            tag = with_budget(tag, begin=syntax.think_begin or "",
                              end=syntax.think_end or THINK_END, budget=ask.reasoning)
            prefill = self._think_prefill(syntax)
        opening = _opening(syntax, ask.tools[0].name) if own_think else ""
        instructions = None if self.renders_tools else tool_instructions(ask, syntax,
                                                                          opening=opening)
        if think and not own_think:  # no thinking block here: StrictCall's, then its syntax
            tag = reasoned(tag["format"], end=THINK_END, budget=ask.reasoning, then="\n")
            syntax = replace(syntax, think_begin="", think_end=THINK_END, think_then="\n")
            prefill = THINK_OPEN
            instructions = think_instructions(instructions)
        mode: Mode = "auto" if auto else "tools"
        # In an agent loop a repeat of an answered call is dropped: if nothing was said
        # before it, the answer alone follows.
        # An "auto" answer may open with a call's JSON object, without the family's opener
        # (rewrites.json_opened): read as the call it is.
        read = replace(syntax, also_read=tuple(
            replace(c, begin=b, end=e) for c in syntax.calls
            for b, e in json_opened(c.begin, c.end))) if auto else syntax
        return Rendering(TagReader(mode, read, thinks=think),
                         StructuralTagSpec.of(tag, label=self.name), instructions, prefill,
                         template_tools=[function_tool(t.name, t.prompt_schema, t.description)
                                         for t in ask.tools] if self.renders_tools else None,
                         thinks=think, fallback=self._text_after_calls(ask)
                         if auto and ask.answered_calls else None, checked_late=late)

    def _string_bounds_left_late(self, tools: list[tuple[str, dict[str, Any]]]
                                 ) -> tuple[list[tuple[str, dict[str, Any]]],
                                            tuple[tuple[str, str], ...]]:
        """The tools' schemas as this family's grammar can hold them, and the keywords
        taken out for the validator to check after decoding ("tool#pointer", why)."""
        return left_late(self.name, tools)

    def _text_after_calls(self, ask: Ask) -> Rendering:
        """The answer alone, after a repeat of an answered call was dropped: its text holds
        no call written as text either (the 0.5B, shown a weather result, writes the same
        call again as bare JSON)."""
        answer = self._answer(ask.answered())
        if answer.spec is not None:
            return answer
        tag = text_without_calls(TEXT_EXCLUDES.get(self.name, ()))
        return replace(answer, spec=StructuralTagSpec.of(tag, label=f"{self.name}+text"))

    def _answer(self, ask: Ask) -> Rendering:
        """Text and JSON answers: the family's reasoning block (or StrictCall's), then the
        answer's own grammar."""
        syntax = self.syntax([])
        if ask.reasoning <= 0:
            return Rendering(TagReader(ask.mode, syntax), ask.answer, ask.instructions)
        answer = json_element(ask.answer.json_schema()) if ask.answer is not None else None
        instructions = ask.instructions
        if self.thinks and syntax.think_end is not None:
            begin, end, then = syntax.think_begin or "", syntax.think_end, syntax.think_then
            prefill = self._think_prefill(syntax)
        else:
            begin, end, then, prefill = "", THINK_END, "\n", THINK_OPEN
            instructions = think_instructions(instructions)
            syntax = replace(syntax, think_begin="", think_end=end, think_then=then)
        tag = reasoned(answer, begin=begin, end=end, then=then, budget=ask.reasoning)
        return Rendering(TagReader(ask.mode, syntax, thinks=True),
                         StructuralTagSpec.of(tag, label=f"{self.name}+reasoning"),
                         instructions, prefill, thinks=True)

    def messages(self, turns: Sequence[Turn]) -> list[dict[str, Any]]:
        if self.renders_tools:
            return structured(_family_ids(self.name, turns))
        return flattened(turns, self._write_calls, opening=self.syntax([]).answer_open)

    def _write_calls(self, calls: Sequence[EarlierCall]) -> str:
        syntax = self.syntax([(c.name, {"type": "object"}) for c in calls])
        first: dict[str, CallSyntax] = {}  # harmony has three ways to write one call
        for call in syntax.calls:
            first.setdefault(call.tool, call)
        return write_calls(syntax, [(first[c.name], c.arguments) for c in calls])

    @staticmethod
    def _think_prefill(syntax: FamilySyntax) -> str:
        """The opening the grammar expects the prompt to have written (`<think>`,
        `<mm:think>`, Kimi K3's `<|open|>think<|sep|>`) where the family's grammar starts
        inside the block (the template may or may not add it; the pipeline leaves it out
        when the rendered prompt already ends with it)."""
        if syntax.think_begin != "" or not syntax.think_open:
            return ""
        return THINK_OPEN if syntax.think_open == THINK_OPEN.strip() else syntax.think_open

    def syntax(self, tools: list[tuple[str, dict[str, Any]]]) -> FamilySyntax:
        syntax = family_syntax(self.name, tools)
        unread = syntax.styles - set(READ_STYLES)
        if unread:
            raise UnsupportedFormat(
                f"model format {self.name!r} writes arguments as {sorted(unread)}, which "
                f"StrictCall cannot read back yet; served formats: {sorted(SERVED)}")
        if syntax.free_between:
            syntax = replace(syntax, separator=BETWEEN_CALLS.get(self.name, "\n"))
        return syntax

    def template_kwargs(self, *, reasoning: bool) -> dict[str, Any]:
        # Qwen3's templates read enable_thinking; DeepSeek V3.1's read thinking; MiniMax
        # M3's read thinking_mode.
        if not self.thinks:
            return {}
        return {"enable_thinking": reasoning, "thinking": reasoning,
                "thinking_mode": "enabled" if reasoning else "disabled"}


# Families whose chat template writes a call's arguments with their keys sorted (Gemma 4's
# `dictsort`): the grammar, which keeps a schema's property order, takes them in that order.
SORTED_KEYS = {"gemma_4"}


def _keys_in_template_order(family: str, schema: dict[str, Any]) -> dict[str, Any]:
    if family not in SORTED_KEYS:
        return schema
    ordered: dict[str, Any] = _sorted_properties(schema)
    return ordered


def _sorted_properties(node: Any) -> Any:
    if isinstance(node, list):
        return [_sorted_properties(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _sorted_properties(v) for k, v in node.items()}
    if isinstance(node.get("properties"), dict):
        out["properties"] = {k: _sorted_properties(node["properties"][k])
                             for k in sorted(node["properties"])}
    return out


# Families whose template writes a call's id into the call itself, in a shape of their
# own: Kimi K2's `<|tool_call_begin|>functions.NAME:N<|tool_call_argument_begin|>`, N
# counting the conversation's calls (its tool-calling guide).
CALL_IDS = {"kimi": "functions.{name}:{n}"}


def _family_ids(family: str, turns: Sequence[Turn]) -> Sequence[Turn]:
    """`turns` with the calls' ids (and the tool results' references to them) in the
    family's own shape, where its template writes them."""
    shape = CALL_IDS.get(family)
    if shape is None:
        return turns
    ids: dict[str, str] = {}
    out: list[Turn] = []
    for turn in turns:
        calls = tuple(replace(c, id=ids.setdefault(c.id, shape.format(name=c.name,
                                                                        n=len(ids))))
                      for c in turn.calls)
        out.append(replace(turn, calls=calls,
                           call_id=ids.get(turn.call_id or "", turn.call_id)))
    return out


def _served() -> dict[str, ModelFormat]:
    formats: dict[str, ModelFormat] = {GENERIC: SmolLM2Format()}
    probe = [("f", {"type": "object", "properties": {"x": {"type": "string"}}})]
    for name in XGRAMMAR_FAMILIES:
        try:
            syntax = family_syntax(name, probe)
        except Exception:  # noqa: BLE001 - a family this xgrammar does not ship
            continue
        if syntax.calls and syntax.styles <= set(READ_STYLES):
            formats[name] = FamilyFormat(name, thinks=syntax.think_end is not None)
    return formats


SERVED = _served()


def get_format(name: str) -> ModelFormat:
    if name in SERVED:
        return SERVED[name]
    if name in XGRAMMAR_FAMILIES:
        raise UnsupportedFormat(f"model format {name!r} is an xgrammar family whose call "
                                f"syntax StrictCall cannot read back yet; served: "
                                f"{sorted(SERVED)}")
    raise UnsupportedFormat(f"unknown model format {name!r}; use auto or one of "
                            f"{sorted(SERVED)}")
