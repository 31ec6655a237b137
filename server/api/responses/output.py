"""The Responses API `response` object, and the pipeline's answer -> response translation.

The object echoes the request's settings (tools, tool_choice, text, ...) as OpenAI does;
`output_text` is not sent: the SDKs compute it from the output items. The reasoning pass's
text is a `reasoning` item first, its text as `reasoning_text` content and no summary, as
OpenAI's open-weights servers (vLLM, gpt-oss) send it: there is no summarizer here."""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import BaseModel

from server.api.responses.request import FunctionToolChoice, ResponsesRequest
from server.api.responses.translate import effort_of
from server.pipeline import Answer, Usage

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


class ReasoningTextPart(BaseModel):
    type: Literal["reasoning_text"] = "reasoning_text"
    text: str


class ReasoningOutput(BaseModel):
    id: str
    type: Literal["reasoning"] = "reasoning"
    summary: list[Any] = []  # no summarizer: the text itself is the content
    content: list[ReasoningTextPart]
    encrypted_content: None = None
    status: Status


OutputItem = ReasoningOutput | MessageOutput | FunctionCallOutput


class ResponseUsage(BaseModel):
    input_tokens: int
    input_tokens_details: dict[str, int] = {"cached_tokens": 0, "cache_write_tokens": 0}
    output_tokens: int
    output_tokens_details: dict[str, int] = {"reasoning_tokens": 0}
    total_tokens: int

    @classmethod
    def of(cls, usage: Usage) -> ResponseUsage:
        return cls(input_tokens=usage.prompt_tokens, output_tokens=usage.completion_tokens,
                   total_tokens=usage.total_tokens,
                   input_tokens_details={"cached_tokens": usage.cached_tokens,
                                         "cache_write_tokens": 0},
                   output_tokens_details={"reasoning_tokens": usage.reasoning_tokens or 0})


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
    reasoning: dict[str, Any] | None = None
    previous_response_id: str | None = None
    store: bool = True  # kept for GET /v1/responses/{id} and previous_response_id
    truncation: str = "disabled"
    metadata: dict[str, str]
    user: str | None
    usage: ResponseUsage | None = None
    # Extension: how each contract call was validated (repair needed, attempts).
    strictcall: dict[str, Any] | None = None


def response_id(answer_id: str) -> str:
    return f"resp_{answer_id}"


def new_item_id(kind: Literal["msg", "fc", "rs"]) -> str:
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
        reasoning=_reasoning_echo(req), metadata=req.metadata or {}, user=req.user,
        previous_response_id=req.previous_response_id, store=req.store is not False,
        usage=usage, strictcall=extension)


def _reasoning_echo(req: ResponsesRequest) -> dict[str, Any] | None:
    """The request's reasoning settings as served (an effort above "high" ran as "high")."""
    if req.reasoning is None:
        return None
    return {"effort": effort_of(req.reasoning),
            "summary": req.reasoning.summary or req.reasoning.generate_summary}


def from_answer(answer: Answer, req: ResponsesRequest) -> ResponseObject:
    status: Status = "incomplete" if answer.finish == "length" else "completed"
    return response_object(req, id=response_id(answer.id), created_at=answer.created,
                           model=answer.model, output=output_of(answer, status),
                           status=status, usage=ResponseUsage.of(answer.usage),
                           extension=answer.extension)


def output_of(answer: Answer, status: Status) -> list[OutputItem]:
    """A reasoning item for the reasoning (if any), a message item for the text (if any),
    then one function_call item per call."""
    items: list[OutputItem] = []
    if answer.reasoning:
        # Cut off while thinking (nothing after it): the reasoning is what is incomplete.
        answered = bool(answer.content or answer.calls)
        items.append(reasoning_item(answer.reasoning, "completed" if answered else status))
    if answer.content or (answer.content is not None and not answer.calls):
        items.append(MessageOutput(id=new_item_id("msg"), status=status,
                                   content=[OutputTextPart(text=answer.content)]))
    for call in answer.calls:
        items.append(FunctionCallOutput(id=new_item_id("fc"), call_id=call.id,
                                        name=call.name, arguments=call.arguments,
                                        status="completed"))
    return items


def reasoning_item(text: str, status: Status) -> ReasoningOutput:
    return ReasoningOutput(id=new_item_id("rs"), status=status,
                           content=[ReasoningTextPart(text=text)])

