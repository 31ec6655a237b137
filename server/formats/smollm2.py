"""StrictCall's own format, from SmolLM2's function-calling data: tools described in the
system turn, calls as one JSON list `<tool_call>[{"name": ..., "arguments": {...}}]</tool_call>`,
and, for the reasoning pass, StrictCall's `<think>` block opened in the prompt.

tool_choice "auto" is served two ways (`Ask.auto`): "decide" opens the call block and lets
the model write `[]` for no call (then a second decode answers), which small models follow;
"trigger" lets the model write text and constrains a call once it writes the opening tag."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, assert_never

from grammars import JsonSchemaSpec, StructuralTagSpec, TextOrToolCallsSpec, ToolCallsSpec
from server.formats.base import Ask, Rendering
from server.formats.history import flattened
from server.formats.instructions import tool_lines, tool_list
from server.formats.reading import Mode, Reading, ReasoningMarks, partial_suffix, split_reasoning
from server.formats.reasoning import (
    THINK_END,
    THINK_OPEN,
    json_element,
    reasoned,
    think_instructions,
)
from server.options import ToolStyle
from server.task import EarlierCall, Turn

NAME = "smollm2"
# The call syntax SmolLM2-Instruct saw in its function-calling data; the grammar produces
# the JSON list and the opening tag is written into the assistant turn for it.
CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"

TOOLS_INSTRUCTIONS = """You are an expert in composing function calls. You are given a \
question and a set of tools. Call the tool that answers the question, with argument values \
taken from the question.
<tools>
{tools}
</tools>
Answer only with the calls, as a JSON list inside tags:
<tool_call>[{{"name": "tool_name", "arguments": {{"argument": "value"}}}}]</tool_call>"""

# A required or forced call written with less prompt (`--tool-prompt`): the grammar writes
# the tag, the tool's name once chosen, and every key, so the prompt only has to say what
# the tools are for and where the values come from.
SHORT_TOOLS_INSTRUCTIONS = """Call the tool that answers the question, with argument values \
taken from the question. Tools:
{tools}"""

AUTO_INSTRUCTIONS = """You are an expert in composing functions. You are given a question \
and a set of possible functions. Based on the question, you will need to make one or more \
function/tool calls to achieve the purpose. If none of the functions can be used, answer the \
question yourself in plain text.

You have access to the following tools:
<tools>
{tools}
</tools>

To call tools, answer with this format and no other text:
<tool_call>[{{"name": "func_name1", "arguments": {{"argument1": "value1"}}}}]</tool_call>"""

DECIDE_INSTRUCTIONS = """You are an expert in composing functions. You are given a question \
and a set of possible functions. Based on the question, you will need to make one or more \
function/tool calls to achieve the purpose. If none of the functions can be used, make the \
tool calls an empty list '[]'.
<tools>
{tools}
</tools>
Answer only with the calls, as a JSON list inside tags:
<tool_call>[{{"name": "tool_name", "arguments": {{"argument": "value"}}}}]</tool_call>"""

_DECODER = json.JSONDecoder()


def tools_instructions(tools: Sequence[dict[str, Any]], style: ToolStyle = "full") -> str:
    """The system turn for a call the model must make (`tools`: name, description,
    parameters)."""
    if style == "full":
        return TOOLS_INSTRUCTIONS.format(tools=tool_lines(tools))
    return SHORT_TOOLS_INSTRUCTIONS.format(tools=tool_list(tools, style))


def write_calls(calls: Sequence[EarlierCall]) -> str:
    listed = [{"name": c.name, "arguments": c.arguments} for c in calls]
    return f"{CALL_OPEN}{json.dumps(listed, ensure_ascii=False)}{CALL_CLOSE}"


@dataclass(frozen=True)
class ListReader:
    """Calls as one JSON array (after `<tool_call>` in auto), optionally after a reasoning
    block."""

    mode: Mode
    reasoning: ReasoningMarks | None = None

    def read(self, text: str, *, complete: bool) -> Reading:
        reasoning, start, thinking = split_reasoning(self.reasoning, text)
        if thinking:
            return Reading(None, None, reasoning=reasoning, thinking=True,
                           answer_from=len(text))
        reading = _read_list(self.mode, text[start:], complete=complete)
        return replace(reading, reasoning=reasoning, answer_from=start)

    @property
    def reasoning_end(self) -> str | None:
        return self.reasoning.end if self.reasoning is not None else None

    def showable(self, text: str, *, stop_holdback: int) -> str:
        _, start, thinking = split_reasoning(self.reasoning, text)
        return "" if thinking else _showable(self.mode, text[start:],
                                             stop_holdback=stop_holdback)

    def cut_after(self, text: str, kept: int) -> str:
        _, start, _ = split_reasoning(self.reasoning, text)
        if self.mode == "auto" and kept == 0:  # no call kept: the text before the call
            return text[:text.index(CALL_OPEN, start)]
        at = text.index(CALL_OPEN, start) + len(CALL_OPEN) if self.mode == "auto" else start
        end = text.index("[", at) + 1
        for _ in range(kept):  # past each kept element and the separator before it
            while text[end] in ", \n\t\r":
                end += 1
            _, end = _DECODER.raw_decode(text, end)
        return text[:end] + "]" + (CALL_CLOSE if self.mode == "auto" else "")


def _read_list(mode: Mode, text: str, *, complete: bool) -> Reading:
    """Split `text` (decoded so far, or all of it once `complete`) into content and calls."""
    match mode:
        case "text" | "json":
            return Reading(text, None)
        case "tools":
            return Reading(None, text)
        case "auto":
            start = text.find(CALL_OPEN)
            if start < 0:
                return Reading(text, None)
            block = text[start + len(CALL_OPEN):]
            if complete:
                block = block[:block.rfind(CALL_CLOSE)]
            return Reading(text[:start].rstrip() or None, block)
        case _:
            assert_never(mode)


def _showable(mode: Mode, text: str, *, stop_holdback: int) -> str:
    """The part of a partial decode's content that can be streamed now: what cannot yet turn
    out to be the start of a stop string (text, json) or of a call block (auto)."""
    match mode:
        case "text" | "json":
            return text[: len(text) - stop_holdback] if stop_holdback else text
        case "auto":
            # Trailing whitespace waits too: before a call it is not part of the content.
            return text[: len(text) - partial_suffix(text, CALL_OPEN)].rstrip()
        case "tools":
            return ""
        case _:
            assert_never(mode)


@dataclass(frozen=True)
class SmolLM2Format:
    name: str = NAME
    thinks: bool = False  # no thinking block of its own: the reasoning pass is prompted
    skip_special_tokens: bool = True

    def render(self, ask: Ask) -> Rendering:
        plain = self._plain(ask)
        if ask.reasoning <= 0:
            return plain
        return self._reasoned(plain, budget=ask.reasoning)

    def _plain(self, ask: Ask) -> Rendering:
        described = [t.described() for t in ask.tools]
        specs = tuple(t.spec for t in ask.tools)
        match ask.mode:
            case "text":
                return Rendering(ListReader("text"), instructions=ask.instructions)
            case "json":
                return Rendering(ListReader("json"), ask.answer, ask.instructions)
            case "tools":
                return Rendering(ListReader("tools"),
                                 ToolCallsSpec(specs, min_calls=1, max_calls=ask.max_calls),
                                 tools_instructions(described, ask.tool_style), CALL_OPEN)
            case "auto" if ask.auto == "trigger" or ask.reasoning > 0:
                calls = ToolCallsSpec(specs, min_calls=1, max_calls=ask.max_calls)
                # In an agent loop a repeat of an answered call is dropped: if nothing was
                # said before it, the answer alone follows.
                return Rendering(ListReader("auto"),
                                 TextOrToolCallsSpec(calls, begin=CALL_OPEN, end=CALL_CLOSE),
                                 AUTO_INSTRUCTIONS.format(tools=tool_lines(described)),
                                 fallback=self.render(ask.answered())
                                 if ask.answered_calls else None)
            case "auto":
                return Rendering(ListReader("tools"),
                                 ToolCallsSpec(specs, min_calls=0, max_calls=ask.max_calls),
                                 DECIDE_INSTRUCTIONS.format(tools=tool_lines(described)),
                                 CALL_OPEN, fallback=self.render(ask.answered()))
            case _:
                assert_never(ask.mode)

    @staticmethod
    def _reasoned(plain: Rendering, *, budget: int) -> Rendering:
        """Free reasoning in StrictCall's `<think>` block, then the answer's grammar."""
        mode = plain.reader.mode
        then = "\n" + CALL_OPEN if mode == "tools" else "\n"
        spec = plain.spec
        if isinstance(spec, TextOrToolCallsSpec):
            answer: dict[str, Any] | None = spec.structural_tag()["format"]
        elif isinstance(spec, ToolCallsSpec | JsonSchemaSpec):
            answer = json_element(spec.json_schema())
        else:
            answer = None  # free text
        tag = reasoned(answer, end=THINK_END, then=then, budget=budget)
        return Rendering(ListReader(mode, ReasoningMarks(THINK_END, then)),
                         StructuralTagSpec.of(tag, label=f"{mode}+reasoning"),
                         think_instructions(plain.instructions), THINK_OPEN, thinks=True)

    def messages(self, turns: Sequence[Turn]) -> list[dict[str, Any]]:
        return flattened(turns, write_calls)

    def template_kwargs(self, *, reasoning: bool) -> dict[str, Any]:
        return {}
