"""`POST /v1/responses`: the Responses API as an adapter over the pipeline; stored and
chained responses in server/api/responses/stored.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request, Response

from server.api.deps import PipelineDep
from server.api.responses.events import ResponseEvents
from server.api.responses.output import from_answer
from server.api.responses.request import ResponsesRequest
from server.api.responses.stored import Earlier, KeptEvents, ResponseLog
from server.api.responses.translate import to_task
from server.api.route import serve
from server.api.sse import FrameStream
from server.pipeline import Answer, Event, Opening
from server.task import Task


class ResponsesAdapter:
    def __init__(self, earlier: Earlier, log: ResponseLog) -> None:
        self.earlier = earlier  # the chain a previous_response_id continues
        self.log = log

    def task(self, body: ResponsesRequest) -> Task:
        return to_task(body, self.earlier.items, session=self.earlier.session)

    def streams(self, body: ResponsesRequest) -> bool:
        return bool(body.stream)

    def render(self, body: ResponsesRequest, answer: Answer) -> dict[str, Any]:
        return from_answer(answer, body).model_dump()

    def stream(self, body: ResponsesRequest, opening: Opening,
               events: AsyncIterator[Event], *, model: str) -> FrameStream:
        return KeptEvents(ResponseEvents(body, opening, events, model=model),
                          lambda response: self.log.keep(body, response, self.earlier))


async def create_response(body: ResponsesRequest, pipeline: PipelineDep, request: Request,
                          response: Response) -> dict[str, Any] | Response:
    log = ResponseLog.of(request)
    adapter = ResponsesAdapter(await log.earlier(body), log)
    answered = await serve(adapter, body, pipeline, request, response)
    if isinstance(answered, dict):  # a stream keeps its response itself, when it is whole
        await log.keep(body, answered, adapter.earlier)
    return answered
