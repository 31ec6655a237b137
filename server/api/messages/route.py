"""POST /v1/messages: the Anthropic Messages API as an adapter over the pipeline."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request, Response

from server.api.deps import PipelineDep
from server.api.messages.render import MessageEvents, to_message
from server.api.messages.translate import to_task
from server.api.messages.wire import MessagesRequest
from server.api.route import serve
from server.pipeline import Answer, Event, Opening
from server.task import Task


def _shows_thinking(body: MessagesRequest) -> bool:
    """display "omitted": the thinking block comes, its text left out."""
    return getattr(body.thinking, "display", None) != "omitted"


class MessagesAdapter:
    def task(self, body: MessagesRequest) -> Task:
        return to_task(body)

    def streams(self, body: MessagesRequest) -> bool:
        return bool(body.stream)

    def render(self, body: MessagesRequest, answer: Answer) -> dict[str, Any]:
        return to_message(answer, show_thinking=_shows_thinking(body))

    def stream(self, body: MessagesRequest, opening: Opening,
               events: AsyncIterator[Event], *, model: str) -> MessageEvents:
        return MessageEvents(opening, events, model=model,
                             show_thinking=_shows_thinking(body))


async def create_message(body: MessagesRequest, pipeline: PipelineDep, request: Request,
                         response: Response) -> dict[str, Any] | Response:
    return await serve(MessagesAdapter(), body, pipeline, request, response)
