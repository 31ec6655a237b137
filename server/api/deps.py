"""What every route handler shares, whichever API it speaks: the pipeline dependency, the
caller (headers and identity), the grammar headers, and cancelling the decode when the
client goes away, the request's time limit passes or the server's shutdown grace ends."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

from fastapi import Depends, Request

from grammars import EnforcementReport, Lookup, reported
from server.errors import RequestTimeout, ServiceError, Unavailable
from server.identity import Caller
from server.pipeline import ChatPipeline
from server.sessions.store import scope_of

T = TypeVar("T")


def _pipeline(request: Request) -> ChatPipeline:
    pipeline: ChatPipeline = request.app.state.pipeline
    return pipeline


PipelineDep = Annotated[ChatPipeline, Depends(_pipeline)]


class GrammarsSeen:
    """Which grammars each tenant has used (the newest `MAX` uses of all tenants). The
    grammar cache is shared, so a hit can mean another tenant sent the same schema: the
    cache headers speak of a grammar only to a tenant that has used it before."""

    MAX = 65_536

    def __init__(self) -> None:
        self._seen: OrderedDict[tuple[str, str], None] = OrderedDict()

    def own(self, request: Request, lookup: Lookup | None) -> bool:
        """Whether `request`'s tenant may be told about `lookup` (and mark it its own)."""
        if lookup is None:
            return True
        scope = scope_of(getattr(request.state, "identity", None))
        key = (scope, lookup.grammar.spec.key)
        known = not lookup.hit or key in self._seen or scope == ""
        self._seen[key] = None
        self._seen.move_to_end(key)
        while len(self._seen) > self.MAX:
            self._seen.popitem(last=False)
        return known


def seen_grammars(request: Request) -> GrammarsSeen:
    seen: GrammarsSeen | None = getattr(request.app.state, "grammars_seen", None)
    if seen is None:
        seen = request.app.state.grammars_seen = GrammarsSeen()
    return seen


def grammar_headers(lookup: Lookup | None, enforcement: EnforcementReport | None, *,
                    own: bool = True) -> dict[str, str]:
    """The grammar's cache state and lookup time (not when `own` is False: a hit on a
    grammar only another tenant had used), and with `enforcement` its report."""
    if lookup is None:
        return {}
    headers = {"X-StrictCall-Grammar-Cache": lookup.state,
               "X-StrictCall-Grammar-Ms": f"{lookup.seconds * 1000:.3f}"} if own else {}
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
