"""Anthropic Messages API wire format: the request StrictCall accepts on POST /v1/messages.

Unknown fields are refused by name (a 400). Block and tool types that this server does not
serve (images, documents, server tools) parse as `OtherBlock`/`ServerTool`, so the
translator can refuse them by name and path rather than with a union error; so do thinking
blocks of earlier turns, which it drops."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

from server.options import StrictCallOptions


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Open(BaseModel):
    """Something this server refuses by name: its other fields do not matter."""

    model_config = ConfigDict(extra="allow")


def _by_type(*models: type[BaseModel], other: type[BaseModel] | None = None) -> Discriminator:
    """The discriminator of a union chosen by the `type` field. Members are tagged by class
    name, which the error renderer leaves out of a field's path; an unknown type goes to
    `other`."""
    tags = {get_args(m.model_fields["type"].annotation)[0]: m.__name__ for m in models}

    def tag(value: Any) -> str | None:
        kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
        if not isinstance(kind, str):  # `"type": {}` is no tag (and unhashable: was a 500)
            kind = None
        return tags.get(kind, other.__name__ if other else None)

    return Discriminator(tag, custom_error_type="invalid_type",
                         custom_error_message=f"`type` must be one of "
                                              f"{', '.join(map(repr, tags))}")


# -- content blocks ---------------------------------------------------------------------

class TextBlock(_Wire):
    type: Literal["text"]
    text: str
    cache_control: dict[str, Any] | None = None  # a prompt-caching hint: accepted, ignored
    citations: list[Any] | None = None  # on assistant turns sent back: ignored


class ToolUseBlock(_Wire):
    type: Literal["tool_use"]
    id: str = Field(min_length=1)
    name: str
    input: dict[str, Any]
    cache_control: dict[str, Any] | None = None
    caller: dict[str, Any] | None = None  # who made the call (the SDK echoes it): ignored


class OtherBlock(_Open):
    """image, document, server tool blocks...: refused by the translator; thinking and
    redacted_thinking blocks of earlier assistant turns: dropped by it."""

    type: str


ResultPart = Annotated[Annotated[TextBlock, Tag("TextBlock")]
                       | Annotated[OtherBlock, Tag("OtherBlock")],
                       _by_type(TextBlock, other=OtherBlock)]


class ToolResultBlock(_Wire):
    type: Literal["tool_result"]
    tool_use_id: str = Field(min_length=1)
    content: str | list[ResultPart] | None = None
    is_error: bool | None = None
    cache_control: dict[str, Any] | None = None


Block = Annotated[Annotated[TextBlock, Tag("TextBlock")]
                  | Annotated[ToolUseBlock, Tag("ToolUseBlock")]
                  | Annotated[ToolResultBlock, Tag("ToolResultBlock")]
                  | Annotated[OtherBlock, Tag("OtherBlock")],
                  _by_type(TextBlock, ToolUseBlock, ToolResultBlock, other=OtherBlock)]


class InputMessage(_Wire):
    role: Literal["user", "assistant"]
    content: str | Annotated[list[Block], Field(min_length=1)]  # [] would be no turn at all


# -- tools ------------------------------------------------------------------------------

class CustomTool(_Wire):
    type: Literal["custom"] | None = None  # Anthropic's client tools may leave it out
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str | None = None
    # None: not sent. A StrictCall extension, as in chat completions: allowed for registered
    # contracts (the server has the schema) and for tools without arguments.
    input_schema: dict[str, Any] | None = None
    strict: bool | None = None
    cache_control: dict[str, Any] | None = None


class ServerTool(_Open):
    """web_search, bash, text_editor, computer...: Anthropic runs these; refused here."""

    type: str


def _tool_tag(value: Any) -> str | None:
    """None for what is no tool at all (`"tools": [null]`): pydantic then refuses it with a
    400, where reading `.type` off it was a 500."""
    if isinstance(value, dict):
        kind = value.get("type", "custom")
    elif isinstance(value, (CustomTool, ServerTool)):
        kind = value.type
    else:
        return None
    return "CustomTool" if kind == "custom" else "ServerTool"


ToolDef = Annotated[Annotated[CustomTool, Tag("CustomTool")]
                    | Annotated[ServerTool, Tag("ServerTool")], Discriminator(_tool_tag)]


class ToolChoiceAuto(_Wire):
    type: Literal["auto"]
    disable_parallel_tool_use: bool | None = None


class ToolChoiceAny(_Wire):
    type: Literal["any"]
    disable_parallel_tool_use: bool | None = None


class ToolChoiceTool(_Wire):
    type: Literal["tool"]
    name: str
    disable_parallel_tool_use: bool | None = None


class ToolChoiceNone(_Wire):
    type: Literal["none"]


ToolChoice = Annotated[Annotated[ToolChoiceAuto, Tag("ToolChoiceAuto")]
                       | Annotated[ToolChoiceAny, Tag("ToolChoiceAny")]
                       | Annotated[ToolChoiceTool, Tag("ToolChoiceTool")]
                       | Annotated[ToolChoiceNone, Tag("ToolChoiceNone")],
                       _by_type(ToolChoiceAuto, ToolChoiceAny, ToolChoiceTool, ToolChoiceNone)]


# -- thinking: the reasoning pass ------------------------------------------------------

class ThinkingEnabled(_Wire):
    type: Literal["enabled"]
    # Anthropic asks for >= 1024; any budget is served here (the pass's own cap: 32768).
    budget_tokens: int = Field(ge=1, le=32768)
    # "omitted": the thinking block comes with its text left out.
    display: Literal["summarized", "omitted"] | None = None


class ThinkingAdaptive(_Wire):
    type: Literal["adaptive"]  # the server's default decides (--reasoning)
    display: Literal["summarized", "omitted"] | None = None


class ThinkingDisabled(_Wire):
    type: Literal["disabled"]


class OtherThinking(_Open):
    """between_tools, ...: refused by the translator (one reasoning pass, before the
    answer, is what this server has)."""

    type: str


Thinking = Annotated[Annotated[ThinkingEnabled, Tag("ThinkingEnabled")]
                     | Annotated[ThinkingAdaptive, Tag("ThinkingAdaptive")]
                     | Annotated[ThinkingDisabled, Tag("ThinkingDisabled")]
                     | Annotated[OtherThinking, Tag("OtherThinking")],
                     _by_type(ThinkingEnabled, ThinkingAdaptive, ThinkingDisabled,
                              other=OtherThinking)]


class MessagesRequest(_Wire):
    model: str
    max_tokens: int = Field(ge=1)
    messages: list[InputMessage] = Field(min_length=1)
    system: str | list[TextBlock] | None = None
    tools: list[ToolDef] | None = None
    tool_choice: ToolChoice | None = None
    stop_sequences: list[str] | None = None
    temperature: float | None = Field(None, ge=0.0, le=1.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    top_k: int | None = None  # refused unless absent: the samplers take temperature, top_p
    stream: bool | None = None
    thinking: Thinking | None = None
    metadata: dict[str, Any] | None = None  # accepted, ignored: it changes no output
    strictcall: StrictCallOptions | None = None  # the same extension as chat completions
