"""A Responses request -> the internal `Task` the pipeline serves.

Everything the Responses API asks for that has a chat equivalent is translated; what would
change the output and has none here (conversations, background responses, reasoning
summaries, hosted tools, images) is refused by name with a 400, before anything is decoded.
A request chained with `previous_response_id` starts from the earlier items
(server/api/responses/stored.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from server.api.responses.request import (
    ContentPart,
    FunctionCallItem,
    FunctionCallOutputItem,
    FunctionTool,
    FunctionToolChoice,
    InputItem,
    MessageItem,
    ReasoningConfig,
    ReasoningItem,
    Refusal,
    ResponsesRequest,
    TextFormatJsonObject,
    TextFormatJsonSchema,
    UnsupportedItem,
    UnsupportedPart,
    UnsupportedTool,
)
from server.errors import InvalidRequest, UnsupportedFeature
from server.options import Effort, StrictCallOptions
from server.task import (
    EarlierCall,
    JsonAnswer,
    NamedTool,
    Task,
    ToolChoice,
    ToolDef,
    Turn,
    WireNames,
)

NAMES = WireNames(api="the OpenAI Responses API", messages="input",
                  max_tokens="max_output_tokens", tool_name="tools[{i}].name",
                  tool_parameters="tools[{i}].parameters", tool_choice_name="tool_choice.name",
                  answer="text.format", answer_schema="text.format.schema")
_NO_CONVERSATIONS = "this server has no Conversations API"

_MEDIA_PARTS = ("input_image", "input_file", "input_audio")

# (field, is it set in a way that matters?, why not and what to do)
_REFUSED: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
    ("conversation", lambda v: v is not None,
     f"{_NO_CONVERSATIONS}; chain responses with previous_response_id (or send the earlier "
     "turns in `input`)"),
    ("background", lambda v: v is True,
     "there are no background responses here; send background=false and stream=true "
     "for long answers"),
    ("prompt", lambda v: v is not None,
     "there are no stored prompt templates here; send `instructions` and `input`"),
    ("top_logprobs", lambda v: bool(v), "remove it"),
)


def to_task(req: ResponsesRequest, earlier: Sequence[InputItem] = (), *,
            session: str | None = None) -> Task:
    """The task that asks for the same output; a 400 naming what cannot be served.
    `earlier`: the items of the response it is chained onto; `session`: the chain's (a
    session the request names itself wins)."""
    _refuse_unsupported(req)
    text = req.text.format if req.text is not None else None
    options = req.strictcall or StrictCallOptions()
    if options.session is None and session is not None:
        options = options.model_copy(update={"session": session})
    return Task(
        model=req.model, turns=tuple(_turns(req, earlier)), tools=_tools(req.tools),
        tool_choice=_tool_choice(req.tool_choice), parallel_tool_calls=req.parallel_tool_calls,
        answer=_answer(text), max_tokens=req.max_output_tokens, temperature=req.temperature,
        top_p=req.top_p, reasoning_effort=effort_of(req.reasoning),
        options=options, names=NAMES)


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


def _turns(req: ResponsesRequest, earlier: Sequence[InputItem]) -> list[Turn]:
    turns: list[Turn] = []
    if req.instructions:
        turns.append(Turn("system", req.instructions))
    for i, item in enumerate(earlier):
        _append_item(turns, item, where=f"previous_response_id's item {i}")
    if isinstance(req.input, str):
        return [*turns, Turn("user", req.input)]
    if not req.input:
        raise InvalidRequest("input is empty; send a string or at least one item",
                             param="input")
    for i, item in enumerate(req.input):
        _append_item(turns, item, where=f"input[{i}]")
    return turns


def _append_item(turns: list[Turn], item: InputItem, *, where: str) -> None:
    if isinstance(item, MessageItem):
        role = "system" if item.role == "developer" else item.role
        turns.append(Turn(role, _text(item.content, where=f"{where}.content")))
    elif isinstance(item, FunctionCallItem):
        call = EarlierCall.of(item.call_id, item.name, item.arguments)
        last = turns[-1] if turns else None
        # One assistant turn: its text and every call it made (items arrive one per call).
        if last is not None and last.role == "assistant":
            turns[-1] = Turn("assistant", last.text, (*last.calls, call))
        else:
            turns.append(Turn("assistant", "", (call,)))
    elif isinstance(item, FunctionCallOutputItem):
        turns.append(Turn("tool", _text(item.output, where=f"{where}.output"),
                          call_id=item.call_id))
    elif isinstance(item, ReasoningItem):
        pass  # earlier reasoning is not shown to the model again (request.ReasoningItem)
    elif isinstance(item, UnsupportedItem):
        raise UnsupportedFeature(
            f"input item type {item.type!r} is not supported; send message, function_call, "
            "function_call_output and reasoning items", param=f"{where}.type")
    else:  # pragma: no cover - the discriminator admits nothing else
        raise AssertionError(item)


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


def _tools(tools: list[FunctionTool | UnsupportedTool] | None) -> tuple[ToolDef, ...]:
    out: list[ToolDef] = []
    for i, tool in enumerate(tools or ()):
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
        out.append(ToolDef(tool.name, tool.description, tool.parameters))
    return tuple(out)


def _tool_choice(choice: Literal["none", "auto", "required"] | FunctionToolChoice | None
                 ) -> ToolChoice | None:
    if isinstance(choice, FunctionToolChoice):
        return NamedTool(choice.name)
    return choice


def _answer(fmt: Any) -> JsonAnswer | None:
    if isinstance(fmt, TextFormatJsonSchema):
        return JsonAnswer(fmt.schema_)
    if isinstance(fmt, TextFormatJsonObject):
        return JsonAnswer({"type": "object"})
    return None  # text: free text
