"""`create_app(settings)`: the FastAPI application, its lifespan and its routes."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, TypeVar

from fastapi import Depends, FastAPI, Request, Response

from grammars import GrammarCache
from server.api import errors
from server.protocol import ChatCompletionRequest
from server.engines.base import Engine
from server.pipeline.chat import ChatPipeline
from server.settings import Settings

T = TypeVar("T")
EngineFactory = Callable[[Settings], Engine]


def create_app(settings: Settings, engine_factory: EngineFactory) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine = engine_factory(settings)
        cache = GrammarCache(engine.grammar_backend, max_entries=settings.grammar_cache_entries)
        app.state.pipeline = ChatPipeline(engine, cache, settings)
        app.state.started = time.time()
        try:
            yield
        finally:
            engine.close()

    app = FastAPI(title="StrictCall", lifespan=lifespan)
    errors.install(app)
    app.get("/health")(health)
    app.get("/v1/models")(list_models)
    app.post("/v1/chat/completions", response_model=None)(chat_completions)
    return app


def _pipeline(request: Request) -> ChatPipeline:
    return request.app.state.pipeline


PipelineDep = Annotated[ChatPipeline, Depends(_pipeline)]


async def health(pipeline: PipelineDep) -> dict:
    stats = pipeline.cache.stats()
    return {"status": "ok", "model": pipeline.model_name, "engine": pipeline.engine.stats(),
            "grammar_cache": {"hits": stats.hits, "misses": stats.misses,
                              "evictions": stats.evictions, "entries": stats.entries}}


async def list_models(pipeline: PipelineDep, request: Request) -> dict:
    return {"object": "list", "data": [{"id": pipeline.model_name, "object": "model",
                                        "created": int(request.app.state.started),
                                        "owned_by": "strictcall"}]}


async def chat_completions(body: ChatCompletionRequest, pipeline: PipelineDep,
                           request: Request, response: Response) -> dict | Response:
    try:
        done = await _until_disconnect(request, pipeline.complete(body))
    except _ClientGone:
        return Response(status_code=499)  # nobody is listening; the decode was stopped
    if done.grammar is not None:
        response.headers["X-StrictCall-Grammar-Cache"] = "hit" if done.grammar.hit else "miss"
        response.headers["X-StrictCall-Grammar-Ms"] = f"{done.grammar.seconds * 1000:.3f}"
    return done.response.model_dump(exclude_none=False)


async def _until_disconnect(request: Request, work: Awaitable[T]) -> T:
    """Run `work`; if the client goes away first, cancel it (which stops its decode)."""
    task = asyncio.ensure_future(work)
    while True:
        done, _ = await asyncio.wait({task}, timeout=0.25)
        if done:
            return task.result()
        if await request.is_disconnected():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            raise _ClientGone


class _ClientGone(Exception):
    pass
