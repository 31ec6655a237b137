"""A Chat Completions request -> the internal `Task`. Fields that would change the output
and that this server does not implement are refused by name, not silently ignored."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from server.api.chat.wire import (
    AssistantMessage,
    ChatCompletionRequest,
    Content,
    Message,
    NamedToolChoice,
    ResponseFormatJsonObject,
    ResponseFormatJsonSchema,
    ToolMessage,
)
from server.errors import InvalidRequest, UnsupportedFeature
from server.options import StrictCallOptions
from server.task import (
    CHAT_NAMES,
    EarlierCall,
    JsonAnswer,
    NamedTool,
    Task,
    ToolChoice,
    ToolDef,
    Turn,
)

# (field, is it set in a way that matters?, what to do)
_REFUSED: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
    ("logprobs", lambda v: v is True, "send logprobs=false"),
    ("top_logprobs", lambda v: bool(v), "remove it"),
    ("frequency_penalty", lambda v: bool(v), "send 0 or remove it"),
    ("presence_penalty", lambda v: bool(v), "send 0 or remove it"),
    ("logit_bias", lambda v: bool(v), "remove it"),
    ("functions", lambda v: v is not None, "use `tools` instead"),
    ("function_call", lambda v: v is not None, "use `tool_choice` instead"),
    ("prediction", lambda v: v is not None, "remove it"),
    ("modalities", lambda v: v not in (None, ["text"]), "send ['text'] or remove it"),
    ("audio", lambda v: v is not None, "remove it"),
    ("web_search_options", lambda v: v is not None, "remove it"),
)


def to_task(req: ChatCompletionRequest) -> Task:
    _refuse_unsupported(req)
    return Task(
        model=req.model, turns=tuple(turn_of(m) for m in req.messages),
        tools=tuple(ToolDef(t.function.name, t.function.description, t.function.parameters)
                    for t in req.tools or ()),
        tool_choice=_tool_choice(req.tool_choice),
        parallel_tool_calls=req.parallel_tool_calls, answer=_answer(req),
        max_tokens=req.max_completion_tokens or req.max_tokens,
        temperature=req.temperature, top_p=req.top_p, seed=req.seed,
        stop=(req.stop,) if isinstance(req.stop, str) else tuple(req.stop or ()),
        reasoning_effort=req.reasoning_effort,
        options=req.strictcall or StrictCallOptions(), names=CHAT_NAMES)


def _refuse_unsupported(req: ChatCompletionRequest) -> None:
    for name, matters, fix in _REFUSED:
        if matters(getattr(req, name)):
            raise UnsupportedFeature(f"{name} is not supported by this server; {fix}",
                                     param=name)
    if req.stream_options is not None and not req.stream:
        raise InvalidRequest("stream_options is only allowed with stream=true",
                             param="stream_options")
    if req.n is not None and req.n > 1:
        raise UnsupportedFeature("n > 1 is not supported; send n=1 and repeat the request",
                                 param="n")


def turn_of(message: Message) -> Turn:
    text = text_of(message.content)
    if isinstance(message, AssistantMessage):
        return Turn("assistant", text, tuple(
            EarlierCall.of(c.id, c.function.name, c.function.arguments)
            for c in message.tool_calls or ()))
    if isinstance(message, ToolMessage):
        return Turn("tool", text, call_id=message.tool_call_id)
    return Turn("system" if message.role == "developer" else message.role, text)


def text_of(content: Content | None) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.text for part in content)


def _tool_choice(choice: Literal["none", "auto", "required"] | NamedToolChoice | None
                 ) -> ToolChoice | None:
    if isinstance(choice, NamedToolChoice):
        return NamedTool(choice.function.name)
    return choice


def _answer(req: ChatCompletionRequest) -> JsonAnswer | None:
    fmt = req.response_format
    if isinstance(fmt, ResponseFormatJsonSchema):
        return JsonAnswer(fmt.json_schema.schema_)
    if isinstance(fmt, ResponseFormatJsonObject):
        return JsonAnswer({"type": "object"})
    return None
