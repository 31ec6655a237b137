"""POST /v1/messages: the Anthropic Messages API as an adapter over the chat pipeline.

A Messages request is translated here into the one internal request
(`ChatCompletionRequest`); the chat pipeline answers it (grammar, validation, contract
repair); messages_reply.py translates the answer into a Message or Anthropic's events. Nothing here
decodes, validates or repairs: the guarantees are the pipeline's."""

from __future__ import annotations

import json
from typing import Any, assert_never

from fastapi import Request, Response
from fastapi.responses import StreamingResponse
from pydantic import ValidationError

from server.api.deps import (ClientGone, PipelineDep, caller_of, grammar_headers,
                             overdue_check, until_disconnect)
from server.api.messages_reply import MessageEvents, sse, to_message
from server.api.messages_wire import (Block, CustomTool, InputMessage, MessagesRequest,
                                      OtherBlock, OtherThinking, ServerTool, TextBlock,
                                      ThinkingDisabled, ThinkingEnabled, ToolChoiceAny,
                                      ToolChoiceAuto, ToolChoiceNone, ToolChoiceTool,
                                      ToolResultBlock, ToolUseBlock)
from server.errors import InvalidRequest, UnsupportedFeature
from server.pipeline.stream import ChunkStream
from server.protocol import ChatCompletionRequest, StrictCallOptions

# Blocks of an earlier turn's thinking, sent back as returned: dropped, since the prompt is
# built from earlier turns' text and calls only; each turn's reasoning pass starts afresh.
_THOUGHTS = ("thinking", "redacted_thinking")


async def create_message(body: MessagesRequest, pipeline: PipelineDep, request: Request,
                         response: Response) -> dict | Response:
    chat = to_chat_request(body)
    caller = caller_of(request)
    if body.stream:
        # Request errors (400s) are answered before the stream starts, as plain errors.
        prep = await pipeline.prepare(chat, caller)
        chunks = ChunkStream(pipeline, prep, include_usage=True,
                             overdue=overdue_check(request))
        events = MessageEvents(chunks, input_tokens=len(prep.request.prompt_ids),
                               show_thinking=_shows_thinking(body))
        return StreamingResponse(sse(events, request), media_type="text/event-stream",
                                 headers={**grammar_headers(prep.lookup, prep.plan.enforcement),
                                          **prep.headers()})
    try:
        done = await until_disconnect(request, pipeline.complete(chat, caller))
    except ClientGone:
        return Response(status_code=499)  # nobody is listening; the decode was stopped
    response.headers.update({**grammar_headers(done.grammar, done.enforcement),
                             **done.headers})
    return to_message(done.response, show_thinking=_shows_thinking(body))


# -- Messages request -> the internal request -------------------------------------------

def to_chat_request(body: MessagesRequest) -> ChatCompletionRequest:
    """The chat request that asks for the same answer, or a 400 naming what is refused."""
    _refuse_unsupported(body)
    chat: dict[str, Any] = {
        "model": body.model, "messages": _chat_messages(body), "max_tokens": body.max_tokens,
        "temperature": body.temperature, "top_p": body.top_p, "stop": body.stop_sequences,
        "strictcall": _strictcall(body), **_chat_tools(body)}
    try:
        return ChatCompletionRequest.model_validate(chat)
    except ValidationError as exc:  # the wire models should make this unreachable
        first = exc.errors()[0]
        raise InvalidRequest(f"the request cannot be served as a chat request: "
                             f"{'.'.join(map(str, first['loc']))}: {first['msg']}") from None


def _strictcall(body: MessagesRequest) -> StrictCallOptions | None:
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
    options = body.strictcall
    if budget is None or (options is not None and options.reasoning_budget is not None):
        return options
    return (options or StrictCallOptions()).model_copy(update={"reasoning_budget": budget})


def _shows_thinking(body: MessagesRequest) -> bool:
    """display "omitted": the thinking block comes, its text left out."""
    return getattr(body.thinking, "display", None) != "omitted"


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


def _chat_messages(body: MessagesRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if body.system:
        system = body.system if isinstance(body.system, str) else \
            "\n\n".join(block.text for block in body.system)
        out.append({"role": "system", "content": system})
    calls_seen: set[str] = set()  # tool_use ids so far: each tool_result must answer one
    for i, message in enumerate(body.messages):
        if isinstance(message.content, str):
            out.append({"role": message.role, "content": message.content})
        elif message.role == "assistant":
            out.append(_assistant_turn(message, f"messages[{i}]", calls_seen))
        else:
            out.extend(_user_turn(message, f"messages[{i}]", calls_seen))
    return out


def _assistant_turn(message: InputMessage, where: str, calls_seen: set[str]) -> dict[str, Any]:
    texts, calls = [], []
    for j, block in enumerate(_blocks(message)):
        if isinstance(block, TextBlock):
            texts.append(block.text)
        elif isinstance(block, ToolUseBlock):
            calls_seen.add(block.id)
            calls.append({"id": block.id, "type": "function", "function": {
                "name": block.name, "arguments": json.dumps(block.input, ensure_ascii=False)}})
        elif block.type in _THOUGHTS:
            continue
        else:
            raise _refused_block(block, f"{where}.content[{j}]", "assistant")
    return {"role": "assistant", "content": "".join(texts) or None, "tool_calls": calls or None}


def _user_turn(message: InputMessage, where: str,
               calls_seen: set[str]) -> list[dict[str, Any]]:
    """Tool results become tool messages; the text around them, user messages, in order."""
    out: list[dict[str, Any]] = []
    texts: list[str] = []
    for j, block in enumerate(_blocks(message)):
        if isinstance(block, TextBlock):
            texts.append(block.text)
        elif isinstance(block, ToolResultBlock):
            if texts:
                out.append({"role": "user", "content": "".join(texts)})
                texts = []
            out.append(_tool_message(block, f"{where}.content[{j}]", calls_seen))
        else:
            raise _refused_block(block, f"{where}.content[{j}]", "user")
    if texts:
        out.append({"role": "user", "content": "".join(texts)})
    return out


def _blocks(message: InputMessage) -> list[Block]:
    assert not isinstance(message.content, str)
    return message.content


def _tool_message(block: ToolResultBlock, where: str, calls_seen: set[str]) -> dict[str, Any]:
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
    return {"role": "tool", "tool_call_id": block.tool_use_id,
            "content": f"Error: {text}" if block.is_error else text}


def _refused_block(block: Any, where: str, inside: str) -> UnsupportedFeature:
    allowed = {"assistant": "'text', 'tool_use' and 'thinking'",
               "user": "'text' and 'tool_result'", "tool_result": "'text'"}[inside]
    return UnsupportedFeature(
        f"{where}: {block.type!r} blocks are not supported in {inside} content (the served "
        f"model reads text, and this server runs no tools itself); send {allowed} blocks",
        param=where)


def _chat_tools(body: MessagesRequest) -> dict[str, Any]:
    tools = []
    for i, tool in enumerate(body.tools or []):
        if isinstance(tool, ServerTool):
            raise UnsupportedFeature(
                f"tools[{i}] is a server tool of type {tool.type!r}: this server runs no tools "
                f"itself; declare a client tool with name, description and input_schema",
                param=f"tools[{i}].type")
        tools.append(_chat_tool(tool))
    return {"tools": tools or None, **_chat_tool_choice(body)}


def _chat_tool(tool: CustomTool) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": tool.name, "description": tool.description, "parameters": tool.input_schema,
        "strict": tool.strict}}


def _chat_tool_choice(body: MessagesRequest) -> dict[str, Any]:
    choice = body.tool_choice
    if choice is None:
        return {}  # "auto" when tools are given: the default of both APIs
    serial = {"parallel_tool_calls": False} if getattr(
        choice, "disable_parallel_tool_use", None) else {}
    match choice:
        case ToolChoiceAuto():
            return {"tool_choice": "auto", **serial}
        case ToolChoiceAny():
            return {"tool_choice": "required", **serial}
        case ToolChoiceTool():
            return {"tool_choice": {"type": "function", "function": {"name": choice.name}},
                    **serial}
        case ToolChoiceNone():
            return {"tool_choice": "none"}
        case _:
            assert_never(choice)
