"""What every route handler shares, whichever API it speaks: the pipeline dependency, the
grammar headers, and cancelling the decode when the client goes away."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Annotated, TypeVar

from fastapi import Depends, Request

from grammars import EnforcementReport, Lookup
from server.pipeline.chat import ChatPipeline

T = TypeVar("T")


def _pipeline(request: Request) -> ChatPipeline:
    return request.app.state.pipeline


PipelineDep = Annotated[ChatPipeline, Depends(_pipeline)]


def grammar_headers(lookup: Lookup | None,
                    enforcement: EnforcementReport | None) -> dict[str, str]:
    if lookup is None:
        return {}
    headers = {"X-StrictCall-Grammar-Cache": "hit" if lookup.hit else "miss",
               "X-StrictCall-Grammar-Ms": f"{lookup.seconds * 1000:.3f}"}
    if enforcement is not None:  # the full report: POST /v1/grammars/compile
        headers["X-StrictCall-Enforcement"] = _latin1(enforcement.summary())
    return headers


def _latin1(text: str) -> str:
    """Header values are latin-1: anything else (a property name in Cyrillic) is escaped."""
    return text.encode("latin-1", "backslashreplace").decode("latin-1")


async def until_disconnect(request: Request, work: Awaitable[T]) -> T:
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
            raise ClientGone


class ClientGone(Exception):
    """The client disconnected before the answer was ready."""
