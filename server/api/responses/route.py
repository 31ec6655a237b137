"""`POST /v1/responses`: the Responses API as an adapter over the pipeline."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request, Response

from server.api.deps import PipelineDep
from server.api.responses.events import ResponseEvents
from server.api.responses.output import from_answer
from server.api.responses.request import ResponsesRequest
from server.api.responses.translate import to_task
from server.api.route import serve
from server.pipeline.answer import Answer, Event
from server.pipeline.prepared import Prepared
from server.task import Task


class ResponsesAdapter:
    def task(self, body: ResponsesRequest) -> Task:
        return to_task(body)

    def streams(self, body: ResponsesRequest) -> bool:
        return bool(body.stream)

    def render(self, body: ResponsesRequest, answer: Answer) -> dict[str, Any]:
        return from_answer(answer, body).model_dump()

    def stream(self, body: ResponsesRequest, prepared: Prepared,
               events: AsyncIterator[Event], *, model: str) -> ResponseEvents:
        return ResponseEvents(body, prepared, events, model=model)


async def create_response(body: ResponsesRequest, pipeline: PipelineDep, request: Request,
                          response: Response) -> dict[str, Any] | Response:
    return await serve(ResponsesAdapter(), body, pipeline, request, response)
