"""OpenAI Responses API request wire format (the stateless subset StrictCall serves).

Unknown fields are refused by name (`extra="forbid"`). Item, part and tool types that the
API defines but this server does not serve parse into `Unsupported*` models, so the refusal
can name the type instead of quoting a union error."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

from server.options import StrictCallOptions


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Foreign(BaseModel):
    """A type the API defines and this server refuses: only its `type` is read."""

    model_config = ConfigDict(extra="allow")
    type: str


def _by_type(known: tuple[str, ...], *, untyped: str | None = None) -> Discriminator:
    """A union discriminator: the `type` when it is one of `known`, else "unsupported".
    Tags read `type=...` so that error paths can leave them out (see api/errors.py)."""

    def tag(value: Any) -> str:
        kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
        kind = untyped if kind is None else kind
        return f"type={kind if kind in known else 'unsupported'}"

    return Discriminator(tag)


# -- content parts ---------------------------------------------------------------------------

class InputText(_Wire):
    type: Literal["input_text"]
    text: str


class OutputText(_Wire):
    """Text of an earlier assistant turn, sent back as it was returned."""

    type: Literal["output_text"]
    text: str
    annotations: list[Any] | None = None
    logprobs: list[Any] | None = None


class Refusal(_Wire):
    type: Literal["refusal"]
    refusal: str


class UnsupportedPart(_Foreign):
    """input_image, input_file, input_audio (this server's models read text only), or a
    type the API does not define."""


ContentPart = Annotated[
    Annotated[InputText, Tag("type=input_text")]
    | Annotated[OutputText, Tag("type=output_text")]
    | Annotated[Refusal, Tag("type=refusal")]
    | Annotated[UnsupportedPart, Tag("type=unsupported")],
    _by_type(("input_text", "output_text", "refusal"))]


# -- input items -----------------------------------------------------------------------------

class MessageItem(_Wire):
    """EasyInputMessage (no `type`, string content) and the typed message item alike."""

    type: Literal["message"] = "message"
    role: Literal["user", "system", "developer", "assistant"]
    content: str | list[ContentPart]
    id: str | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None
    phase: Literal["commentary", "final_answer"] | None = None


class FunctionCallItem(_Wire):
    """A call the model made earlier, sent back so the next turn sees it."""

    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str
    id: str | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None


class FunctionCallOutputItem(_Wire):
    """The result of a call, for the model to read."""

    type: Literal["function_call_output"]
    call_id: str
    output: str | list[ContentPart]
    id: str | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None


class ReasoningItem(_Wire):
    """An earlier turn's reasoning, sent back as it was returned (clients that keep the
    context pass the whole output on). Accepted and dropped: the prompt is built from
    earlier turns' text and calls only; each turn's reasoning pass starts afresh."""

    type: Literal["reasoning"]
    summary: list[Any] = []
    content: list[Any] | None = None
    encrypted_content: str | None = None
    id: str | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None


class UnsupportedItem(_Foreign):
    """item_reference, built-in tool calls and their outputs."""


InputItem = Annotated[
    Annotated[MessageItem, Tag("type=message")]
    | Annotated[FunctionCallItem, Tag("type=function_call")]
    | Annotated[FunctionCallOutputItem, Tag("type=function_call_output")]
    | Annotated[ReasoningItem, Tag("type=reasoning")]
    | Annotated[UnsupportedItem, Tag("type=unsupported")],
    _by_type(("message", "function_call", "function_call_output", "reasoning"),
             untyped="message")]


# -- tools, tool_choice, text format ---------------------------------------------------------

class FunctionTool(_Wire):
    type: Literal["function"]
    name: str = Field(pattern=r"^[A-Za-z0-9_.\-]{1,64}$")
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None
    # Accepted and ignored: they do not change what is generated.
    output_schema: dict[str, Any] | None = None
    allowed_callers: list[Literal["direct", "programmatic"]] | None = None
    # Refused when true: there is no tool search here.
    defer_loading: bool | None = None


class UnsupportedTool(_Foreign):
    """web_search, file_search, computer_use, mcp, custom, ...: built-in or hosted tools."""


ToolParam = Annotated[
    Annotated[FunctionTool, Tag("type=function")]
    | Annotated[UnsupportedTool, Tag("type=unsupported")],
    _by_type(("function",))]


class FunctionToolChoice(_Wire):
    type: Literal["function"]
    name: str


class TextFormatText(_Wire):
    type: Literal["text"]


class TextFormatJsonObject(_Wire):
    type: Literal["json_object"]


class TextFormatJsonSchema(_Wire):
    type: Literal["json_schema"]
    name: str = Field(pattern=r"^[A-Za-z0-9_\-]{1,64}$")
    schema_: dict[str, Any] = Field(alias="schema")
    description: str | None = None
    strict: bool | None = None


TextFormat = Annotated[TextFormatText | TextFormatJsonObject | TextFormatJsonSchema,
                       Field(discriminator="type")]


class TextConfig(_Wire):
    format: TextFormat = TextFormatText(type="text")
    verbosity: Literal["low", "medium", "high"] | None = None


# The openai SDK's ReasoningEffort. "xhigh" and "max" are served as "high", the largest
# budget here (reasoning.EFFORT_BUDGETS).
ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]
Summary = Literal["auto", "concise", "detailed"]


class ReasoningConfig(_Wire):
    effort: ReasoningEffort | None = None
    # There is no summarizer: "auto" is served as no summary (the reasoning itself comes as
    # the reasoning item's content); "concise" and "detailed" are refused (translate.py).
    summary: Summary | None = None
    generate_summary: Summary | None = None  # the deprecated spelling of `summary`


class StreamOptions(_Wire):
    include_obfuscation: bool | None = None  # nothing is obfuscated here: ignored


# -- the request -----------------------------------------------------------------------------

class ResponsesRequest(_Wire):
    model: str
    input: str | list[InputItem]
    instructions: str | None = None
    tools: list[ToolParam] | None = None
    tool_choice: Literal["none", "auto", "required"] | FunctionToolChoice | None = None
    parallel_tool_calls: bool | None = None
    text: TextConfig | None = None
    max_output_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    reasoning: ReasoningConfig | None = None
    # Refused with a 400 that names them when set in a way that matters (see translate.py).
    store: bool | None = None
    previous_response_id: str | None = None
    conversation: str | dict[str, Any] | None = None
    background: bool | None = None
    prompt: dict[str, Any] | None = None
    include: list[str] | None = None
    top_logprobs: int | None = Field(None, ge=0, le=20)
    # Accepted and ignored: they do not change what is generated. (No built-in tools, so no
    # built-in tool calls to limit; no truncation: a prompt over the context is a 400.)
    max_tool_calls: int | None = Field(None, ge=1)
    truncation: Literal["auto", "disabled"] | None = None
    metadata: dict[str, str] | None = None
    user: str | None = None
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None
    prompt_cache_retention: str | None = None
    service_tier: str | None = None
    strictcall: StrictCallOptions | None = None
