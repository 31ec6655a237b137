"""What every route handler shares, whichever API it speaks: the pipeline dependency, the
caller (headers and identity), the grammar headers, and cancelling the decode when the
client goes away, the request's time limit passes or the server's shutdown grace ends."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

from fastapi import Depends, Request

from grammars import EnforcementReport, Lookup, reported
from server.errors import RequestTimeout, ServiceError, Unavailable
from server.identity import Caller
from server.pipeline import ChatPipeline

T = TypeVar("T")


def _pipeline(request: Request) -> ChatPipeline:
    pipeline: ChatPipeline = request.app.state.pipeline
    return pipeline


PipelineDep = Annotated[ChatPipeline, Depends(_pipeline)]


def grammar_headers(lookup: Lookup | None,
                    enforcement: EnforcementReport | None) -> dict[str, str]:
    if lookup is None:
        return {}
    headers = {"X-StrictCall-Grammar-Cache": lookup.state,
               "X-StrictCall-Grammar-Ms": f"{lookup.seconds * 1000:.3f}"}
    if enforcement is not None:  # the full report: POST /v1/grammars/compile
        # A cold compile bridged by llguidance: what its mask left to the validator says so.
        enforcement = reported(lookup.grammar, enforcement)
        headers["X-StrictCall-Enforcement"] = _latin1(enforcement.summary())
    return headers


def _latin1(text: str) -> str:
    """Header values are latin-1: anything else (a property name in Cyrillic) is escaped."""
    return text.encode("latin-1", "backslashreplace").decode("latin-1")


def caller_of(request: Request) -> Caller:
    """Headers, the identity the gate authenticated (None when keys are off), and the
    request id."""
    return Caller(dict(request.headers), getattr(request.state, "identity", None),
                  getattr(request.state, "request_id", None))


# A request still running this long before the shutdown grace ends is answered 503 then,
# so it is not cut without an answer when the server exits.
SHUTDOWN_ANSWER_S = 1.0


def overdue_check(request: Request) -> Callable[[], ServiceError | None]:
    """A check that says why `request` must stop now, if it must: its time limit passed
    (504), or the server is about to exit (503). Both are worth a retry."""
    state = request.app.state
    limit = state.pipeline.settings.request_timeout_s
    started = getattr(request.state, "started", None) or time.monotonic()

    def overdue() -> ServiceError | None:
        now = time.monotonic()
        if limit is not None and now - started > limit:
            return RequestTimeout(f"the request ran past this server's {limit:g} s time limit "
                                  "and was cancelled; retry, or ask for fewer tokens")
        stop_at = getattr(state, "shutdown_deadline", None)
        if stop_at is not None and now > stop_at - SHUTDOWN_ANSWER_S:
            return Unavailable("the server is shutting down and could not finish this "
                               "request; retry (another replica can answer)")
        return None

    return overdue


async def until_disconnect(request: Request, work: Awaitable[T]) -> T:
    """Run `work`; if the client goes away first, or the request is overdue, cancel it
    (which stops its decode)."""
    task = asyncio.ensure_future(work)
    overdue = overdue_check(request)
    while True:
        done, _ = await asyncio.wait({task}, timeout=0.25)
        if done:
            return task.result()
        gone = await request.is_disconnected()
        why = None if gone else overdue()
        if gone or why is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            raise why if why is not None else ClientGone


def ended_with(request: Request) -> Callable[[Callable[[], object]], None]:
    """Registers work to stop when the request's response ends, however it ends (the gate
    runs them: server/api/gate.py)."""
    def register(stop: Callable[[], object]) -> None:
        getattr(request.state, "on_end", []).append(stop)
    return register


class ClientGone(Exception):
    """The client disconnected before the answer was ready."""
