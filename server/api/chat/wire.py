"""OpenAI Chat Completions wire format (the subset StrictCall serves)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from server.options import Effort, StrictCallOptions


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TextPart(_Wire):
    type: Literal["text"]
    text: str


Content = str | list[TextPart]


class FunctionCall(_Wire):
    name: str
    arguments: str


class ToolCall(_Wire):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class SystemMessage(_Wire):
    role: Literal["system", "developer"]
    content: Content
    name: str | None = None


class UserMessage(_Wire):
    role: Literal["user"]
    content: Content
    name: str | None = None


class AssistantMessage(_Wire):
    role: Literal["assistant"]
    content: Content | None = None
    tool_calls: list[ToolCall] | None = None
    name: str | None = None
    refusal: str | None = None


class ToolMessage(_Wire):
    role: Literal["tool"]
    content: Content
    tool_call_id: str


Message = Annotated[SystemMessage | UserMessage | AssistantMessage | ToolMessage,
                    Field(discriminator="role")]


class FunctionDef(_Wire):
    name: str = Field(pattern=r"^[A-Za-z0-9_.\-]{1,64}$")
    description: str | None = None
    # None: not sent. Allowed for registered contracts (the server has the schema) and for
    # functions without arguments.
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class Tool(_Wire):
    type: Literal["function"]
    function: FunctionDef


class NamedFunction(_Wire):
    name: str


class NamedToolChoice(_Wire):
    type: Literal["function"]
    function: NamedFunction


class JsonSchemaFormat(_Wire):
    name: str = Field(pattern=r"^[A-Za-z0-9_\-]{1,64}$")
    description: str | None = None
    schema_: dict[str, Any] = Field(alias="schema")
    strict: bool | None = None


class ResponseFormatJsonSchema(_Wire):
    type: Literal["json_schema"]
    json_schema: JsonSchemaFormat


class ResponseFormatJsonObject(_Wire):
    type: Literal["json_object"]


class ResponseFormatText(_Wire):
    type: Literal["text"]


ResponseFormat = Annotated[ResponseFormatJsonSchema | ResponseFormatJsonObject |
                           ResponseFormatText, Field(discriminator="type")]


class StreamOptions(_Wire):
    include_usage: bool | None = None


class ChatCompletionRequest(_Wire):
    model: str
    messages: list[Message] = Field(min_length=1)
    tools: list[Tool] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None
    response_format: ResponseFormat | None = None
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    seed: int | None = Field(None, ge=-(2**63), lt=2**63)  # what a sampler's generator takes
    stop: str | list[str] | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    n: int | None = Field(None, ge=1)
    # Refused with a 400 that names them when they would change the output (translate.py).
    logprobs: bool | None = None
    top_logprobs: int | None = Field(None, ge=0, le=20)
    frequency_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    presence_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    logit_bias: dict[str, float] | None = None
    functions: list[Any] | None = None
    function_call: Any = None
    prediction: Any = None
    modalities: list[str] | None = None
    audio: Any = None
    # The reasoning pass's budget by name (server/formats/reasoning.py EFFORT_BUDGETS).
    reasoning_effort: Effort | None = None
    web_search_options: Any = None
    # Accepted and ignored: they do not change what is generated.
    user: str | None = None
    metadata: dict[str, str] | None = None
    store: bool | None = None
    service_tier: str | None = None
    strictcall: StrictCallOptions | None = None


class CompletionTokensDetails(BaseModel):
    reasoning_tokens: int = 0


class PromptTokensDetails(BaseModel):
    # Prompt tokens whose KV cache came from an earlier request (prefix reuse).
    cached_tokens: int = 0


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    completion_tokens_details: CompletionTokensDetails | None = None
    prompt_tokens_details: PromptTokensDetails | None = None


class ResponseMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str | None
    tool_calls: list[ToolCall] | None = None
    # The free reasoning before the answer, under both names in use (vLLM's `reasoning`,
    # DeepSeek's and SGLang's `reasoning_content`); absent without a reasoning pass.
    reasoning_content: str | None = None
    reasoning: str | None = None


class Choice(BaseModel):
    index: int
    message: ResponseMessage
    finish_reason: Literal["stop", "length", "tool_calls"]
    logprobs: None = None
    # vLLM's extension: the stop string that ended the text (None: end of turn or no text).
    stop_reason: str | None = None


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: Usage
    # Extension: how each contract call was validated (repair needed, attempts).
    strictcall: dict[str, Any] | None = None
