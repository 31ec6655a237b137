"""A Messages request -> the internal `Task`, or a 400 naming what is refused. Nothing here
decodes, validates or repairs: the guarantees are the pipeline's."""

from __future__ import annotations

from typing import Any, assert_never

from server.api.messages.wire import (
    Block,
    CustomTool,
    InputMessage,
    MessagesRequest,
    OtherBlock,
    OtherThinking,
    ServerTool,
    TextBlock,
    ThinkingDisabled,
    ThinkingEnabled,
    ToolChoiceAny,
    ToolChoiceAuto,
    ToolChoiceNone,
    ToolChoiceTool,
    ToolResultBlock,
    ToolUseBlock,
)
from server.errors import InvalidRequest, UnsupportedFeature
from server.options import StrictCallOptions
from server.task import EarlierCall, NamedTool, Task, ToolChoice, ToolDef, Turn, WireNames

NAMES = WireNames(api="the Anthropic Messages API", stop="stop_sequences",
                  tool_name="tools[{i}].name", tool_parameters="tools[{i}].input_schema",
                  tool_choice_name="tool_choice.name", answer="output_format",
                  answer_schema="output_format.schema")

# Blocks of an earlier turn's thinking, sent back as returned: dropped, since the prompt is
# built from earlier turns' text and calls only; each turn's reasoning pass starts afresh.
_THOUGHTS = ("thinking", "redacted_thinking")


def to_task(body: MessagesRequest) -> Task:
    """The task that asks for the same answer, or a 400 naming what is refused."""
    _refuse_unsupported(body)
    choice, parallel = _tool_choice(body)
    return Task(
        model=body.model, turns=tuple(_turns(body)), tools=_tools(body),
        tool_choice=choice, parallel_tool_calls=parallel, max_tokens=body.max_tokens,
        temperature=body.temperature, top_p=body.top_p, stop=tuple(body.stop_sequences or ()),
        options=_strictcall(body), names=NAMES)


def _strictcall(body: MessagesRequest) -> StrictCallOptions:
    """The strictcall options with `thinking` as the reasoning budget: enabled, its
    budget_tokens; disabled, 0 (also where the server thinks by default); adaptive or
    absent, the server's default. strictcall.reasoning_budget, if sent, wins."""
    match body.thinking:
        case ThinkingEnabled(budget_tokens=tokens):
            budget: int | None = tokens
        case ThinkingDisabled():
            budget = 0
        case _:
            budget = None
    options = body.strictcall or StrictCallOptions()
    if budget is None or options.reasoning_budget is not None:
        return options
    return options.model_copy(update={"reasoning_budget": budget})


def _refuse_unsupported(body: MessagesRequest) -> None:
    thinking = body.thinking
    if isinstance(thinking, OtherThinking):
        raise UnsupportedFeature(
            f"thinking type {thinking.type!r} is not supported: this server thinks once, "
            f"before the answer; send \"enabled\" (with budget_tokens), \"adaptive\" or "
            f"\"disabled\"", param="thinking.type")
    if isinstance(thinking, ThinkingEnabled) and thinking.budget_tokens >= body.max_tokens:
        raise InvalidRequest(
            f"thinking.budget_tokens ({thinking.budget_tokens}) must be less than max_tokens "
            f"({body.max_tokens}): the thinking counts toward max_tokens; raise max_tokens or "
            f"lower the budget", param="thinking.budget_tokens")
    if body.top_k is not None:
        raise UnsupportedFeature("top_k is not supported (sampling here takes temperature and "
                                 "top_p); leave it out", param="top_k")
    if body.messages[-1].role == "assistant":
        raise UnsupportedFeature(
            "a final assistant message (a prefill to continue) is not supported: the answer "
            "would start a new turn instead; end with a user message",
            param=f"messages[{len(body.messages) - 1}]")


def _turns(body: MessagesRequest) -> list[Turn]:
    out: list[Turn] = []
    if body.system:
        system = body.system if isinstance(body.system, str) else \
            "\n\n".join(block.text for block in body.system)
        out.append(Turn("system", system))
    calls_seen: set[str] = set()  # tool_use ids so far: each tool_result must answer one
    for i, message in enumerate(body.messages):
        if isinstance(message.content, str):
            out.append(Turn(message.role, message.content))
        elif message.role == "assistant":
            out.append(_assistant_turn(message, f"messages[{i}]", calls_seen))
        else:
            out.extend(_user_turn(message, f"messages[{i}]", calls_seen))
    return out


def _assistant_turn(message: InputMessage, where: str, calls_seen: set[str]) -> Turn:
    texts, calls = [], []
    for j, block in enumerate(_blocks(message)):
        if isinstance(block, TextBlock):
            texts.append(block.text)
        elif isinstance(block, ToolUseBlock):
            calls_seen.add(block.id)
            calls.append(EarlierCall(block.id, block.name, block.input))
        elif block.type in _THOUGHTS:
            continue
        else:
            raise _refused_block(block, f"{where}.content[{j}]", "assistant")
    return Turn("assistant", "".join(texts), tuple(calls))


def _user_turn(message: InputMessage, where: str, calls_seen: set[str]) -> list[Turn]:
    """Tool results become tool turns; the text around them, user turns, in order."""
    out: list[Turn] = []
    texts: list[str] = []
    for j, block in enumerate(_blocks(message)):
        if isinstance(block, TextBlock):
            texts.append(block.text)
        elif isinstance(block, ToolResultBlock):
            if texts:
                out.append(Turn("user", "".join(texts)))
                texts = []
            out.append(_tool_turn(block, f"{where}.content[{j}]", calls_seen))
        else:
            raise _refused_block(block, f"{where}.content[{j}]", "user")
    if texts:
        out.append(Turn("user", "".join(texts)))
    return out


def _blocks(message: InputMessage) -> list[Block]:
    assert not isinstance(message.content, str)
    return message.content


def _tool_turn(block: ToolResultBlock, where: str, calls_seen: set[str]) -> Turn:
    if block.tool_use_id not in calls_seen:
        raise InvalidRequest(f"{where}.tool_use_id {block.tool_use_id!r} answers no tool_use "
                             f"block before it; send the assistant turn with that tool_use "
                             f"first", param=f"{where}.tool_use_id")
    parts = [] if block.content is None else \
        [block.content] if isinstance(block.content, str) else block.content
    texts = []
    for k, part in enumerate(parts):
        if isinstance(part, OtherBlock):
            raise _refused_block(part, f"{where}.content[{k}]", "tool_result")
        texts.append(part if isinstance(part, str) else part.text)
    text = "".join(texts)
    return Turn("tool", f"Error: {text}" if block.is_error else text,
                call_id=block.tool_use_id)


def _refused_block(block: Any, where: str, inside: str) -> UnsupportedFeature:
    allowed = {"assistant": "'text', 'tool_use' and 'thinking'",
               "user": "'text' and 'tool_result'", "tool_result": "'text'"}[inside]
    return UnsupportedFeature(
        f"{where}: {block.type!r} blocks are not supported in {inside} content (the served "
        f"model reads text, and this server runs no tools itself); send {allowed} blocks",
        param=where)


def _tools(body: MessagesRequest) -> tuple[ToolDef, ...]:
    tools = []
    for i, tool in enumerate(body.tools or []):
        if isinstance(tool, ServerTool):
            raise UnsupportedFeature(
                f"tools[{i}] is a server tool of type {tool.type!r}: this server runs no tools "
                f"itself; declare a client tool with name, description and input_schema",
                param=f"tools[{i}].type")
        tools.append(_tool(tool))
    return tuple(tools)


def _tool(tool: CustomTool) -> ToolDef:
    return ToolDef(tool.name, tool.description, tool.input_schema)


def _tool_choice(body: MessagesRequest) -> tuple[ToolChoice | None, bool | None]:
    """(the tool choice, parallel calls allowed); None: "auto" when tools are given, the
    default of both APIs."""
    choice = body.tool_choice
    if choice is None:
        return None, None
    serial = False if getattr(choice, "disable_parallel_tool_use", None) else None
    match choice:
        case ToolChoiceAuto():
            return "auto", serial
        case ToolChoiceAny():
            return "required", serial
        case ToolChoiceTool():
            return NamedTool(choice.name), serial
        case ToolChoiceNone():
            return "none", None
        case _:
            assert_never(choice)
