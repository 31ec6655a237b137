"""A Responses request -> the internal chat request the pipeline serves.

Everything the Responses API asks for that has a chat equivalent is translated; what would
change the output and has none here (storage, reasoning summaries, hosted tools, images) is
refused by name with a 400, before anything is decoded."""

from __future__ import annotations

import re
from typing import Any, Literal

from server.api.responses.request import (ContentPart, FunctionCallItem,
                                          FunctionCallOutputItem, FunctionTool,
                                          FunctionToolChoice, InputItem, MessageItem,
                                          ReasoningConfig, ReasoningItem, Refusal,
                                          ResponsesRequest, TextFormatJsonObject,
                                          TextFormatJsonSchema, UnsupportedItem,
                                          UnsupportedPart, UnsupportedTool)
from server.errors import InvalidRequest, ServiceError, UnsupportedFeature
from server.formats.reasoning import Effort
from server.protocol import (AssistantMessage, ChatCompletionRequest, FunctionCall,
                             FunctionDef, JsonSchemaFormat, Message, NamedFunction,
                             NamedToolChoice, ResponseFormat, ResponseFormatJsonObject,
                             ResponseFormatJsonSchema, SystemMessage, Tool, ToolCall,
                             ToolMessage, UserMessage)

ToolChoice = Literal["none", "auto", "required"]
_STATELESS = "this server is stateless: it keeps no responses or conversations"

_MEDIA_PARTS = ("input_image", "input_file", "input_audio")

# (field, is it set in a way that matters?, why not and what to do)
_REFUSED = (
    ("store", lambda v: v is True,
     f"{_STATELESS}; send store=false or leave it out"),
    ("previous_response_id", lambda v: v is not None,
     f"{_STATELESS}; send the earlier turns (messages, function_call and "
     "function_call_output items) in `input` instead"),
    ("conversation", lambda v: v is not None,
     f"{_STATELESS}; send the earlier turns in `input` instead"),
    ("background", lambda v: v is True,
     f"{_STATELESS}, so it cannot answer later; send background=false and stream=true "
     "for long answers"),
    ("prompt", lambda v: v is not None,
     "there are no stored prompt templates here; send `instructions` and `input`"),
    ("top_logprobs", lambda v: bool(v), "remove it"),
)


def to_chat(req: ResponsesRequest) -> ChatCompletionRequest:
    """The chat request that asks for the same output; a 400 naming what cannot be served."""
    _refuse_unsupported(req)
    text = req.text.format if req.text is not None else None
    return ChatCompletionRequest(
        model=req.model, messages=_messages(req), tools=_tools(req.tools),
        tool_choice=_tool_choice(req.tool_choice), parallel_tool_calls=req.parallel_tool_calls,
        response_format=_response_format(text), max_tokens=req.max_output_tokens,
        temperature=req.temperature, top_p=req.top_p, user=req.user, metadata=req.metadata,
        reasoning_effort=effort_of(req.reasoning), strictcall=req.strictcall)


def effort_of(reasoning: ReasoningConfig | None) -> Effort | None:
    """The chat reasoning_effort for `reasoning.effort` (None: the server's default).
    Efforts above "high" get the largest budget there is, "high"'s."""
    effort = reasoning.effort if reasoning is not None else None
    if effort == "xhigh" or effort == "max":
        return "high"
    return effort


def _refuse_unsupported(req: ResponsesRequest) -> None:
    for name, matters, fix in _REFUSED:
        if matters(getattr(req, name)):
            raise UnsupportedFeature(f"{name} is not supported; {fix}", param=name)
    for name in ("summary", "generate_summary"):
        if getattr(req.reasoning, name, None) not in (None, "auto"):
            raise UnsupportedFeature(
                f"reasoning.{name} {getattr(req.reasoning, name)!r} is not supported: this "
                "server has no reasoning summarizer; the reasoning itself comes whole as the "
                "reasoning item's content (reasoning_text). Send 'auto' or leave it out",
                param=f"reasoning.{name}")
    if "message.output_text.logprobs" in (req.include or []):
        raise UnsupportedFeature("logprobs are not supported; remove "
                                 "'message.output_text.logprobs' from include", param="include")
    if req.text is not None and req.text.verbosity not in (None, "medium"):
        raise UnsupportedFeature("text.verbosity is not supported; send 'medium' or leave it "
                                 "out", param="text.verbosity")
    if req.stream_options is not None and not req.stream:
        raise InvalidRequest("stream_options is only allowed with stream=true",
                             param="stream_options")


def _messages(req: ResponsesRequest) -> list[Message]:
    messages: list[Message] = []
    if req.instructions:
        messages.append(SystemMessage(role="system", content=req.instructions))
    if isinstance(req.input, str):
        return [*messages, UserMessage(role="user", content=req.input)]
    if not req.input:
        raise InvalidRequest("input is empty; send a string or at least one item",
                             param="input")
    for i, item in enumerate(req.input):
        _append_item(messages, item, where=f"input[{i}]")
    return messages


def _append_item(messages: list[Message], item: InputItem, *, where: str) -> None:
    if isinstance(item, MessageItem):
        messages.append(_message(item, where=where))
    elif isinstance(item, FunctionCallItem):
        call = ToolCall(id=item.call_id, function=FunctionCall(name=item.name,
                                                               arguments=item.arguments))
        last = messages[-1] if messages else None
        # One assistant turn: its text and every call it made (items arrive one per call).
        if isinstance(last, AssistantMessage):
            last.tool_calls = [*(last.tool_calls or []), call]
        else:
            messages.append(AssistantMessage(role="assistant", content=None, tool_calls=[call]))
    elif isinstance(item, FunctionCallOutputItem):
        messages.append(ToolMessage(role="tool", tool_call_id=item.call_id,
                                    content=_text(item.output, where=f"{where}.output")))
    elif isinstance(item, ReasoningItem):
        pass  # earlier reasoning is not shown to the model again (request.ReasoningItem)
    elif isinstance(item, UnsupportedItem):
        raise UnsupportedFeature(
            f"input item type {item.type!r} is not supported; send message, function_call, "
            "function_call_output and reasoning items", param=f"{where}.type")
    else:  # pragma: no cover - the discriminator admits nothing else
        raise AssertionError(item)


def _message(item: MessageItem, *, where: str) -> Message:
    content = _text(item.content, where=f"{where}.content")
    if item.role == "user":
        return UserMessage(role="user", content=content)
    if item.role == "assistant":
        return AssistantMessage(role="assistant", content=content)
    return SystemMessage(role=item.role, content=content)


def _text(content: str | list[ContentPart], *, where: str) -> str:
    if isinstance(content, str):
        return content
    texts = []
    for j, part in enumerate(content):
        if isinstance(part, UnsupportedPart):
            why = "this server's model reads text only" if part.type in _MEDIA_PARTS \
                else "there is no such part type"
            raise UnsupportedFeature(f"content part type {part.type!r} is not supported: {why}; "
                                     "send input_text parts", param=f"{where}[{j}].type")
        texts.append(part.refusal if isinstance(part, Refusal) else part.text)
    return "".join(texts)


def _tools(tools: list[FunctionTool | UnsupportedTool] | None) -> list[Tool] | None:
    if tools is None:
        return None
    out = []
    for i, tool in enumerate(tools):
        if isinstance(tool, UnsupportedTool):
            raise UnsupportedFeature(f"tool type {tool.type!r} is not supported: this server "
                                     "serves function tools only", param=f"tools[{i}].type")
        if tool.defer_loading:
            raise UnsupportedFeature("defer_loading is not supported: there is no tool search "
                                     "here; send the tool without it",
                                     param=f"tools[{i}].defer_loading")
        if tool.allowed_callers is not None and "direct" not in tool.allowed_callers:
            raise UnsupportedFeature("only direct calls are served; add 'direct' to "
                                     "allowed_callers", param=f"tools[{i}].allowed_callers")
        out.append(Tool(type="function", function=FunctionDef(
            name=tool.name, description=tool.description, parameters=tool.parameters,
            strict=tool.strict)))
    return out


def _tool_choice(choice: ToolChoice | FunctionToolChoice | None
                 ) -> ToolChoice | NamedToolChoice | None:
    if isinstance(choice, FunctionToolChoice):
        return NamedToolChoice(type="function", function=NamedFunction(name=choice.name))
    return choice


def _response_format(fmt: Any) -> ResponseFormat | None:
    if isinstance(fmt, TextFormatJsonSchema):
        return ResponseFormatJsonSchema(type="json_schema", json_schema=JsonSchemaFormat(
            name=fmt.name, description=fmt.description, schema=fmt.schema_, strict=fmt.strict))
    if isinstance(fmt, TextFormatJsonObject):
        return ResponseFormatJsonObject(type="json_object")
    return None  # text: free text


# The pipeline names chat fields in its errors; a Responses client sent these instead.
_PARAM_NAMES = (
    (re.compile(r"^messages\b"), "input"),
    (re.compile(r"^max_(completion_)?tokens$"), "max_output_tokens"),
    (re.compile(r"^response_format\.json_schema\.schema"), "text.format.schema"),
    (re.compile(r"^response_format\b"), "text.format"),
    (re.compile(r"^(tools\[\d+\])\.function\."), r"\1."),
    (re.compile(r"^tool_choice\.function\."), "tool_choice."),
)


def with_responses_param(error: ServiceError) -> ServiceError:
    """`error`, its `param` renamed to the Responses field the client sent."""
    if error.param:
        for pattern, replacement in _PARAM_NAMES:
            error.param = pattern.sub(replacement, error.param)
    return error
