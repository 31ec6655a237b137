"""The route skeleton every generation API shares: translate the body into a `Task`, prepare
it (every 400 before anything decodes or a stream starts), then answer it whole or stream
its events; the adapter renders both in its API's shape."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol, TypeVar

from fastapi import Request, Response
from fastapi.responses import StreamingResponse

from server.api.deps import (
    ClientGone,
    caller_of,
    ended_with,
    grammar_headers,
    overdue_check,
    until_disconnect,
)
from server.api.sse import FrameStream, write_sse
from server.pipeline.answer import Answer, Event
from server.pipeline.chat import ChatPipeline
from server.pipeline.prepared import Prepared
from server.task import Task

B = TypeVar("B", contravariant=True)


class Adapter(Protocol[B]):
    """One API: its wire request (`B`) in, its answer and stream out."""

    def task(self, body: B) -> Task: ...

    def streams(self, body: B) -> bool: ...

    def render(self, body: B, answer: Answer) -> dict[str, Any]: ...

    def stream(self, body: B, prepared: Prepared, events: AsyncIterator[Event],
               *, model: str) -> FrameStream: ...


async def serve(adapter: Adapter[B], body: B, pipeline: ChatPipeline, request: Request,
                response: Response) -> dict[str, Any] | Response:
    task = adapter.task(body)
    caller = caller_of(request)
    try:
        prepared = await until_disconnect(request, pipeline.prepare(task, caller))
        headers = {**grammar_headers(prepared.decode.lookup, prepared.plan.enforcement),
                   **prepared.headers()}
        if adapter.streams(body):
            events = pipeline.stream(prepared, overdue=overdue_check(request),
                                     on_end=ended_with(request))
            frames = adapter.stream(body, prepared, events, model=pipeline.model_name)
            return StreamingResponse(write_sse(frames, request.url.path),
                                     media_type="text/event-stream", headers=headers)
        answer = await until_disconnect(request, pipeline.complete(prepared))
    except ClientGone:
        return Response(status_code=499)  # nobody is listening; the decode was stopped
    response.headers.update({**headers, **answer.headers})
    return adapter.render(body, answer)
