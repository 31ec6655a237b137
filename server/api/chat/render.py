"""The pipeline's answer as a `chat.completion`, and its events as `chat.completion.chunk`s
(the role first, then deltas, the finish reason with the `strictcall` extension, and the
usage when asked for)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, assert_never

from server.api.chat.wire import (
    ChatCompletion,
    Choice,
    CompletionTokensDetails,
    FunctionCall,
    PromptTokensDetails,
    ResponseMessage,
    ToolCall,
    Usage,
)
from server.api.sse import Frame
from server.errors import ServiceError
from server.pipeline import (
    Answer,
    ArgumentsDelta,
    CallDone,
    CallStarted,
    Event,
    Finished,
    Opening,
    ReasoningDelta,
    TextDelta,
)
from server.pipeline import Usage as AnswerUsage


def completion_id(answer_id: str) -> str:
    return f"chatcmpl-{answer_id}"


def usage_of(usage: AnswerUsage) -> Usage:
    details = None if usage.reasoning_tokens is None else \
        CompletionTokensDetails(reasoning_tokens=usage.reasoning_tokens)
    return Usage(prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
                 total_tokens=usage.total_tokens, completion_tokens_details=details,
                 prompt_tokens_details=PromptTokensDetails(cached_tokens=usage.cached_tokens))


def completion(answer: Answer) -> ChatCompletion:
    calls = [ToolCall(id=c.id, function=FunctionCall(name=c.name, arguments=c.arguments))
             for c in answer.calls]
    message = ResponseMessage(content=answer.content, tool_calls=calls or None,
                              reasoning_content=answer.reasoning, reasoning=answer.reasoning)
    choice = Choice(index=0, message=message, finish_reason=answer.finish,
                    stop_reason=answer.stop_string)
    return ChatCompletion(id=completion_id(answer.id), created=answer.created,
                          model=answer.model, choices=[choice], usage=usage_of(answer.usage),
                          strictcall=answer.extension)


class ChunkStream:
    def __init__(self, opening: Opening, events: AsyncIterator[Event], *, model: str,
                 include_usage: bool) -> None:
        self.events = events
        self.first_content = "" if opening.content_first else None
        self.include_usage = include_usage
        self.head = {"id": completion_id(opening.id), "object": "chat.completion.chunk",
                     "created": opening.created, "model": model}

    done = "[DONE]"

    async def frames(self) -> AsyncIterator[Frame]:
        yield self._chunk({"role": "assistant", "content": self.first_content})
        async for event in self.events:
            match event:
                case ReasoningDelta(text=text):
                    yield self._chunk({"reasoning_content": text, "reasoning": text})
                case TextDelta(text=text):
                    yield self._chunk({"content": text})
                case CallStarted(index=index, id=id, name=name):
                    yield self._chunk(_call(index, {"arguments": "", "name": name}, id=id))
                case ArgumentsDelta(index=index, text=text):
                    yield self._chunk(_call(index, {"arguments": text}))
                case CallDone():
                    pass  # the deltas said it all
                case Finished(answer=answer):
                    for frame in self._finish(answer):
                        yield frame
                case _:
                    assert_never(event)

    def _finish(self, answer: Answer) -> list[Frame]:
        extra = {"strictcall": answer.extension} if answer.extension else {}
        frames = [self._chunk({}, answer.finish, answer.stop_string, **extra)]
        if self.include_usage:
            frames.append(self._chunk(None, usage=usage_of(answer.usage).model_dump()))
        return frames

    def error(self, error: ServiceError, path: str) -> Frame:
        return Frame(error.problem(path))

    def _chunk(self, delta: dict[str, Any] | None, finish: str | None = None,
               stop_reason: str | None = None, **extra: Any) -> Frame:
        choices = [] if delta is None else [
            {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish,
             **({"stop_reason": stop_reason} if finish else {})}]
        return Frame({**self.head, "choices": choices, **extra})


def _call(index: int, function: dict[str, Any], *, id: str | None = None) -> dict[str, Any]:
    call: dict[str, Any] = {"index": index, "function": function}
    if id is not None:
        call.update(id=id, type="function")
    return {"tool_calls": [call]}
