"""POST /v1/chat/completions."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request, Response

from server.api.chat.render import ChunkStream, completion
from server.api.chat.translate import to_task
from server.api.chat.wire import ChatCompletionRequest
from server.api.deps import PipelineDep
from server.api.route import serve
from server.pipeline import Answer, Event, Opening
from server.task import Task


class ChatAdapter:
    def task(self, body: ChatCompletionRequest) -> Task:
        return to_task(body)

    def streams(self, body: ChatCompletionRequest) -> bool:
        return bool(body.stream)

    def render(self, body: ChatCompletionRequest, answer: Answer) -> dict[str, Any]:
        return completion(answer).model_dump(exclude_none=False)

    def stream(self, body: ChatCompletionRequest, opening: Opening,
               events: AsyncIterator[Event], *, model: str) -> ChunkStream:
        include = bool(body.stream_options and body.stream_options.include_usage)
        return ChunkStream(opening, events, model=model, include_usage=include)


async def chat_completions(body: ChatCompletionRequest, pipeline: PipelineDep,
                           request: Request, response: Response) -> dict[str, Any] | Response:
    return await serve(ChatAdapter(), body, pipeline, request, response)
