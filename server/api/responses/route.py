"""`POST /v1/responses`: the Responses API as an adapter over the chat pipeline. The request
is translated to the internal chat request, the pipeline plans, decodes, validates and
repairs as for Chat Completions, and its answer is translated back."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request, Response
from fastapi.responses import StreamingResponse

from server.api.responses.events import ResponseEvents
from server.api.responses.output import from_completion
from server.api.responses.request import ResponsesRequest
from server.api.responses.translate import to_chat, with_responses_param
from server.api.deps import (ClientGone, PipelineDep, caller_of, grammar_headers,
                             overdue_check, until_disconnect)
from server.errors import ServiceError
from server.pipeline.stream import ChunkStream


async def create_response(body: ResponsesRequest, pipeline: PipelineDep, request: Request,
                          response: Response) -> dict[str, Any] | Response:
    caller = caller_of(request)
    try:
        chat = to_chat(body)
        if body.stream:
            # Request errors (400s) are answered before the stream starts, as plain problems.
            prep = await pipeline.prepare(chat, caller)
            chunks = ChunkStream(pipeline, prep, include_usage=True,
                                 overdue=overdue_check(request)).events()
            events = ResponseEvents(body, chunks, model=pipeline.model_name).events()
            return StreamingResponse(_sse(events), media_type="text/event-stream",
                                     headers={**grammar_headers(prep.lookup, prep.plan.enforcement),
                                          **prep.headers()})
        done = await until_disconnect(request, pipeline.complete(chat, caller))
    except ServiceError as exc:
        raise with_responses_param(exc) from None
    except ClientGone:
        return Response(status_code=499)  # nobody is listening; the decode was stopped
    response.headers.update({**grammar_headers(done.grammar, done.enforcement),
                             **done.headers})
    return from_completion(done.response, body).model_dump()


async def _sse(events: AsyncIterator[dict[str, Any]]) -> AsyncIterator[str]:
    async for event in events:
        yield f"event: {event['type']}\ndata: {json.dumps(event, ensure_ascii=False)}\n\n"
