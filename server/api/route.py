"""The route skeleton every generation API shares: translate the body into a `Task`, prepare
it (every 400 before anything decodes or a stream starts), then answer it whole or stream
its events; the adapter renders both in its API's shape."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any, Protocol, TypeVar

from fastapi import Request, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from server.api.deps import (
    ClientGone,
    caller_of,
    ended_with,
    grammar_headers,
    overdue_check,
    seen_grammars,
    until_disconnect,
)
from server.api.sse import FrameStream, write_sse
from server.execution.replays import HEADER, Replays
from server.pipeline import Answer, ChatPipeline, Event, Opening
from server.task import Task

B = TypeVar("B", contravariant=True)


class Adapter(Protocol[B]):
    """One API: its wire request (`B`) in, its answer and stream out."""

    def task(self, body: B) -> Task: ...

    def streams(self, body: B) -> bool: ...

    def render(self, body: B, answer: Answer) -> dict[str, Any]: ...

    def stream(self, body: B, opening: Opening, events: AsyncIterator[Event],
               *, model: str) -> FrameStream: ...


async def serve(adapter: Adapter[B], body: B, pipeline: ChatPipeline, request: Request,
                response: Response) -> dict[str, Any] | Response:
    """The answer; with an `Idempotency-Key` header, the one kept for the key where this
    body was sent with it before (server/api/replays.py)."""
    key = request.headers.get(HEADER)
    replays: Replays | None = getattr(request.app.state, "replays", None)
    if key is None or replays is None:
        return await _serve(adapter, body, pipeline, request, response)
    wire = body.model_dump(mode="json") if isinstance(body, BaseModel) else body
    caller = caller_of(request)
    answer = await replays.answer(
        key, route=request.url.path, owner=pipeline.owner_of(caller), body=wire,
        streams=adapter.streams(body), headers=response.headers,
        run=lambda: _serve(adapter, body, pipeline, request, response))
    assert isinstance(answer, (dict, Response))  # what _serve returns
    return answer


async def _serve(adapter: Adapter[B], body: B, pipeline: ChatPipeline, request: Request,
                 response: Response) -> dict[str, Any] | Response:
    task = adapter.task(body)
    caller = caller_of(request)
    try:
        prepared = await until_disconnect(request, pipeline.prepare(task, caller))
        opening = prepared.opening()
        headers = {**grammar_headers(opening.grammar, opening.enforcement,
                                     own=seen_grammars(request).own(request, opening.grammar)),
                   **opening.headers}
        if adapter.streams(body):
            events = pipeline.stream(prepared, overdue=overdue_check(request))
            frames = adapter.stream(body, opening, events, model=pipeline.model_name)
            sse = write_sse(frames, request.url.path)
            # Ended from outside (the gate's write deadline: its client stopped reading),
            # the stream sits at a `yield` and would never learn: closed then, which stops
            # its decode (server/pipeline/stream.py).
            ended_with(request)(lambda: _close_later(sse))
            return StreamingResponse(sse, media_type="text/event-stream", headers=headers)
        answer = await until_disconnect(request, pipeline.complete(prepared))
    except ClientGone:
        return Response(status_code=499)  # nobody is listening; the decode was stopped
    response.headers.update({**headers, **answer.headers})
    return adapter.render(body, answer)


def _close_later(stream: AsyncGenerator[str, None]) -> None:
    """Close `stream` once the loop is free (a finished one: nothing to do)."""
    async def close() -> None:
        with contextlib.suppress(Exception):
            await stream.aclose()
    task = asyncio.get_running_loop().create_task(close())
    _CLOSING.add(task)  # held until done: a task nobody holds may be collected
    task.add_done_callback(_CLOSING.discard)


_CLOSING: set[asyncio.Task[None]] = set()
