"""The Responses API `response` object, and the chat completion -> response translation.

The object echoes the request's settings (tools, tool_choice, text, ...) as OpenAI does;
`output_text` is not sent: the SDKs compute it from the output items."""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

from pydantic import BaseModel

from server.api.responses.request import FunctionToolChoice, ResponsesRequest
from server.protocol import ChatCompletion, ResponseMessage, Usage

Status = Literal["in_progress", "completed", "incomplete"]


class OutputTextPart(BaseModel):
    type: Literal["output_text"] = "output_text"
    text: str
    annotations: list[Any] = []
    logprobs: list[Any] = []


class MessageOutput(BaseModel):
    id: str
    type: Literal["message"] = "message"
    role: Literal["assistant"] = "assistant"
    status: Status
    content: list[OutputTextPart]


class FunctionCallOutput(BaseModel):
    id: str
    type: Literal["function_call"] = "function_call"
    call_id: str  # the chat tool call id: what function_call_output items answer
    name: str
    arguments: str
    status: Status


OutputItem = MessageOutput | FunctionCallOutput


class ResponseUsage(BaseModel):
    input_tokens: int
    input_tokens_details: dict[str, int] = {"cached_tokens": 0, "cache_write_tokens": 0}
    output_tokens: int
    output_tokens_details: dict[str, int] = {"reasoning_tokens": 0}
    total_tokens: int

    @classmethod
    def of(cls, usage: Usage) -> ResponseUsage:
        return cls(input_tokens=usage.prompt_tokens, output_tokens=usage.completion_tokens,
                   total_tokens=usage.total_tokens)


class ResponseObject(BaseModel):
    id: str
    object: Literal["response"] = "response"
    created_at: int
    status: Status
    incomplete_details: dict[str, str] | None = None
    error: None = None
    model: str
    output: list[OutputItem]
    instructions: str | None
    tools: list[dict[str, Any]]
    tool_choice: str | dict[str, Any]
    parallel_tool_calls: bool
    text: dict[str, Any]
    temperature: float | None
    top_p: float | None
    max_output_tokens: int | None
    reasoning: None = None
    previous_response_id: None = None
    store: bool = False
    truncation: str = "disabled"
    metadata: dict[str, str]
    user: str | None
    usage: ResponseUsage | None = None
    # Extension: how each contract call was validated (repair needed, attempts).
    strictcall: dict[str, Any] | None = None


def new_response_id() -> str:
    return f"resp_{uuid.uuid4().hex}"


def new_item_id(kind: Literal["msg", "fc"]) -> str:
    return f"{kind}_{uuid.uuid4().hex}"


def response_object(req: ResponsesRequest, *, id: str, created_at: int, model: str,
                    output: list[OutputItem], status: Status = "in_progress",
                    usage: ResponseUsage | None = None,
                    extension: dict[str, Any] | None = None) -> ResponseObject:
    """The response with `req`'s settings echoed; "incomplete" means max_output_tokens."""
    text = req.text.model_dump(by_alias=True, exclude_none=True) if req.text is not None \
        else {"format": {"type": "text"}}
    choice = req.tool_choice
    return ResponseObject(
        id=id, created_at=created_at, status=status, model=model, output=output,
        incomplete_details={"reason": "max_output_tokens"} if status == "incomplete" else None,
        instructions=req.instructions,
        tools=[t.model_dump(exclude_none=True) for t in req.tools or []],
        tool_choice=choice.model_dump() if isinstance(choice, FunctionToolChoice)
        else choice or "auto",
        parallel_tool_calls=req.parallel_tool_calls is not False, text=text,
        temperature=req.temperature, top_p=req.top_p, max_output_tokens=req.max_output_tokens,
        metadata=req.metadata or {}, user=req.user, usage=usage, strictcall=extension)


def from_completion(completion: ChatCompletion, req: ResponsesRequest) -> ResponseObject:
    choice = completion.choices[0]
    status: Status = "incomplete" if choice.finish_reason == "length" else "completed"
    return response_object(req, id=new_response_id(), created_at=completion.created,
                           model=completion.model, output=output_of(choice.message, status),
                           status=status, usage=ResponseUsage.of(completion.usage),
                           extension=completion.strictcall)


def output_of(message: ResponseMessage, status: Status) -> list[OutputItem]:
    """A message item for the text (if any), then one function_call item per call."""
    items: list[OutputItem] = []
    if message.content or (message.content is not None and not message.tool_calls):
        items.append(MessageOutput(id=new_item_id("msg"), status=status,
                                   content=[OutputTextPart(text=message.content)]))
    for call in message.tool_calls or []:
        items.append(FunctionCallOutput(id=new_item_id("fc"), call_id=call.id,
                                        name=call.function.name,
                                        arguments=call.function.arguments, status="completed"))
    return items


def now() -> int:
    return int(time.time())
