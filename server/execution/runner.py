"""Running a validated call's handler: a time limit per attempt, retries for reads only,
and one normalized outcome whatever happened.

    succeeded            the handler returned
    partial              it returned contracts.Partial: part of the work was done
    failed               it raised contracts.ToolFailed (it did not act), or a read kept
                         failing; `problem` says why
    timed_out            a read ran out of time on every attempt
    side_effect_unknown  a write timed out or crashed after it may have acted: it is never
                         retried, and its key refuses to run again until resolved
    approval_required    (decided before running) a human must approve it first
    denied               (decided before running) the policy refuses it

A sync handler runs on a thread of its owner's pool (`--handler-workers` threads per
owner), never the event loop's default pool that plans chat requests: on a timeout the
thread cannot be stopped and runs on, holding its place, and the outcome says so
(`still_running`: the caller stores its real outcome when it ends). When every thread of
an owner is held, a call is refused at once without running (failed, retryable): hung
handlers of one owner stop neither other owners' tools nor chat. An async handler is
cancelled on its timeout.

What was sent decides the class of an HTTP handler's failure: a refused connection, a
connect timeout or no free connection sent nothing (failed, retryable: its key may run
again); a 429 is the endpoint refusing before it acted (the same, with its Retry-After);
a read timeout or a 5xx after the request went out may have acted.

What a handler returns goes back only if it fits the contract's `output` model (where it
has one): a read whose result does not fit has `failed`; a write that acted and returned
something else is `side_effect_unknown`. Never the raw payload: neither that, nor an
exception's text or an HTTP error body, reaches the client or the model; they are kept, as
`internal`, for the audit log. Every problem says whether a retry may help (`retryable`,
`retry_after` where known) and whether a person must act (`owner_action_required`)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ValidationError

from contracts import ExecutionSpec, HttpHandler, Kind, Partial, ToolContext, ToolFailed
from server.errors import (
    SIDE_EFFECT_UNKNOWN,
    TOOL_ERROR,
    TOOL_FAILED,
    TOOL_OUTPUT_INVALID,
    TOOL_PARTIAL,
    TOOL_TIMED_OUT,
    OutcomeProblem,
)
from server.execution.pools import HandlerPools, PoolFull

Status = Literal["succeeded", "partial", "failed", "timed_out", "side_effect_unknown",
                 "approval_required", "denied"]


@dataclass(frozen=True)
class Execution:
    outcome: Status
    result: Any = None
    problem: dict[str, Any] | None = None
    attempts: int = 0
    seconds: float = 0.0
    internal: str | None = None  # what went wrong in the handler's words: the audit's only
    # A sync handler's thread that outlived its time limit: its real outcome, when it ends.
    still_running: concurrent.futures.Future[Any] | None = field(default=None, compare=False)

    def as_dict(self) -> dict[str, Any]:
        """What the client (and the idempotency store's replay) gets: no `internal`."""
        return {"outcome": self.outcome, "result": self.result, "problem": self.problem,
                "attempts": self.attempts, "seconds": round(self.seconds, 6)}


def problem(kind: OutcomeProblem, detail: str, *, retryable: bool = False,
            retry_after: int | None = None, owner: bool = False) -> dict[str, Any]:
    """An execution's problem (RFC 9457): `owner`: a person must act before it can go on."""
    out: dict[str, Any] = {"type": kind.type, "title": kind.title,
                           "detail": detail, "retryable": retryable,
                           "owner_action_required": owner}
    if retryable and retry_after is not None:
        out["retry_after"] = retry_after
    return out


class _MayHaveActed(Exception):
    """The handler failed in a way that does not say whether it acted."""


class _Refused(Exception):
    """An HTTP endpoint refused the call (a 4xx): it did not act."""

    def __init__(self, public: str, internal: str) -> None:
        super().__init__(public)
        self.public, self.internal = public, internal


class _EndpointBusy(ToolFailed):
    """An HTTP endpoint's 429: it refused before acting, and says when to come back."""

    def __init__(self, retry_after: int) -> None:
        super().__init__("the tool's endpoint is busy (429); it did not act", retryable=True)
        self.retry_after = retry_after


# The longest a call to a tool's endpoint waits to connect, or for a free connection of
# its owner's pool, before it is "nothing was sent" (at most half the tool's time limit).
CONNECT_S = 3.0


class OwnerClients:
    """An HTTP client per tool owner, each with its own connections (`connections` at
    most): one owner's endpoint that hangs holds its own owner's connections, never
    another's."""

    def __init__(self, *, connections: int) -> None:
        self._limits = httpx.Limits(max_connections=connections,
                                    max_keepalive_connections=connections)
        self._clients: dict[str, httpx.AsyncClient] = {}

    def __call__(self, owner: str) -> httpx.AsyncClient:
        client = self._clients.get(owner)
        if client is None:
            client = self._clients[owner] = httpx.AsyncClient(limits=self._limits,
                                                              timeout=None)
        return client

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()


class Runner:
    def __init__(self, http: httpx.AsyncClient | OwnerClients, *,
                 workers_per_owner: int = 8) -> None:
        """`http`: a client per owner (OwnerClients), or one client for every owner."""
        self._http = http if isinstance(http, OwnerClients) else (lambda owner: http)
        self.pools = HandlerPools(workers_per_owner)

    async def run(self, spec: ExecutionSpec, arguments: dict[str, Any], *, kind: Kind,
                  context: ToolContext, output: type[BaseModel] | None = None,
                  owner: str = "unowned") -> Execution:
        done = await self._run(spec, arguments, kind=kind, context=context, owner=owner)
        return self._fit(done, output, tool=context.tool, kind=kind)

    async def late(self, running: concurrent.futures.Future[Any], *, kind: Kind,
                   tool: str, output: type[BaseModel] | None = None) -> Execution:
        """The outcome of a handler thread that outlived its time limit, once it ends."""
        try:
            value = await asyncio.wrap_future(running)
        except Exception as exc:  # noqa: BLE001 - classified as any attempt's error is
            done, _ = _raised(exc, tool, read=kind == "read")
        else:
            done, _ = _returned(value)
        return self._fit(done, output, tool=tool, kind=kind)

    @staticmethod
    def _fit(done: Execution, output: type[BaseModel] | None, *, tool: str,
             kind: Kind) -> Execution:
        if output is None or done.outcome not in ("succeeded", "partial"):
            return done
        return _fitted(done, output, tool=tool, kind=kind)

    async def _run(self, spec: ExecutionSpec, arguments: dict[str, Any], *, kind: Kind,
                   context: ToolContext, owner: str) -> Execution:
        started = time.perf_counter()
        tries = 1 + (spec.retries if kind == "read" else 0)  # writes: never retried blindly
        attempt, last = 0, Execution("failed")
        for attempt in range(1, tries + 1):
            ctx = ToolContext(context.tool, context.idempotency_key, context.tenant,
                              context.roles, attempt)
            last, retry = await self._attempt(spec, arguments, kind, ctx, owner)
            if not retry:
                break
        return replace(last, attempts=attempt, seconds=time.perf_counter() - started)

    async def _attempt(self, spec: ExecutionSpec, arguments: dict[str, Any], kind: Kind,
                       ctx: ToolContext, owner: str) -> tuple[Execution, bool]:
        """One try: its outcome, and whether another try may help (reads only)."""
        read, thread = kind == "read", None
        call: Awaitable[Any]
        try:
            if _is_sync(spec.handler):
                thread = self.pools.submit(owner, _sync_call, spec.handler, dict(arguments),
                                           ctx)
                call = asyncio.shield(asyncio.wrap_future(thread))
            else:
                call = self._call(spec.handler, arguments, ctx, owner=owner,
                                  timeout_s=spec.timeout_s)
            value = await asyncio.wait_for(call, spec.timeout_s)
            if inspect.isawaitable(value):  # a sync handler that returned a coroutine
                value = await asyncio.wait_for(value, spec.timeout_s)
        except PoolFull:
            return Execution("failed", problem=problem(
                TOOL_FAILED, f"all {self.pools.workers} threads for {owner!r}'s tools are "
                "running earlier calls; it did not run: retry later", retryable=True,
                retry_after=1)), False
        except (TimeoutError, httpx.ReadTimeout, httpx.WriteTimeout):
            if read:
                return Execution("timed_out", problem=problem(
                    TOOL_TIMED_OUT, f"{ctx.tool!r} did not answer within "
                    f"{spec.timeout_s:g} s", retryable=True, retry_after=1)), True
            if thread is not None and not thread.done():
                return replace(unknown_outcome(
                    ctx.tool, f"did not answer within {spec.timeout_s:g} s and is still "
                    "running; its outcome is kept when it ends (ask again with this "
                    "idempotency key)"), still_running=thread), False
            return unknown_outcome(ctx.tool, f"did not answer within {spec.timeout_s:g} s"), \
                False
        except Exception as exc:  # noqa: BLE001 - a handler's failure is an outcome, not a 500
            return _raised(exc, ctx.tool, read=read)
        return _returned(value)

    async def _call(self, handler: Any, arguments: dict[str, Any], ctx: ToolContext, *,
                    owner: str, timeout_s: float) -> Any:
        if isinstance(handler, HttpHandler):
            return await self._post(handler, arguments, ctx, owner=owner, timeout_s=timeout_s)
        return await handler(dict(arguments), ctx)

    async def _post(self, handler: HttpHandler, arguments: dict[str, Any],
                    ctx: ToolContext, *, owner: str, timeout_s: float) -> Any:
        headers = dict(handler.headers)
        if ctx.idempotency_key is not None:
            headers["Idempotency-Key"] = ctx.idempotency_key
        body = {"tool": ctx.tool, "arguments": arguments,
                "idempotency_key": ctx.idempotency_key}
        try:
            # Connecting and waiting for a connection are bounded apart (the request was
            # not sent: a retry may get through); the answer, by the tool's time limit.
            reach = min(CONNECT_S, timeout_s / 2)
            resp = await self._http(owner).post(
                handler.url, json=body, headers=headers,
                timeout=httpx.Timeout(None, connect=reach, pool=reach))
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout):
            # The request never left: nothing was done, and a retry may get through.
            raise ToolFailed(f"the tool's endpoint cannot be reached ({ctx.tool!r}); "
                             "nothing was sent", retryable=True) from None
        except (httpx.ReadTimeout, httpx.WriteTimeout):
            raise
        except httpx.HTTPError as exc:
            raise _MayHaveActed(f"{handler.url}: {type(exc).__name__}: {exc}") from None
        return _answer(resp, handler.url)


def _is_sync(handler: Any) -> bool:
    return not isinstance(handler, HttpHandler) and not (
        inspect.iscoroutinefunction(handler)
        or inspect.iscoroutinefunction(type(handler).__call__))


def _sync_call(handler: Any, arguments: dict[str, Any], ctx: ToolContext) -> Any:
    return handler(arguments, ctx)


def _answer(resp: httpx.Response, url: str) -> Any:
    """An HTTP endpoint's answer as a handler's return value or exception."""
    if resp.status_code == 429:  # refused before acting; it says when to come back
        wait = resp.headers.get("retry-after", "")
        raise _EndpointBusy(int(wait) if wait.isdigit() else 1)
    if resp.status_code >= 500:
        raise _MayHaveActed(f"{url} answered {resp.status_code}: {resp.text[:300]}")
    if resp.status_code >= 400:
        raise _Refused(f"the tool's endpoint refused the call ({resp.status_code})",
                       f"{url} answered {resp.status_code}: {resp.text[:300]}")
    try:
        value = resp.json()
    except ValueError:
        return resp.text
    if isinstance(value, dict) and value.get("status") == "partial":
        return Partial(value, str(value.get("detail", "the endpoint did part of it")))
    return value


def _returned(value: Any) -> tuple[Execution, bool]:
    if isinstance(value, Partial):
        return Execution("partial", value.result, problem(TOOL_PARTIAL, value.detail)), False
    return Execution("succeeded", value), False


def _raised(exc: BaseException, tool: str, *, read: bool) -> tuple[Execution, bool]:
    """A handler's exception as its outcome, and whether a retry may help (reads only)."""
    if isinstance(exc, _Refused):  # an HTTP endpoint's 4xx: its body is the audit's only
        return Execution("failed", problem=problem(TOOL_FAILED, exc.public),
                         internal=exc.internal), False
    if isinstance(exc, ToolFailed):  # the handler's own words, written for the caller
        return Execution("failed", problem=problem(
            TOOL_FAILED, exc.detail, retryable=exc.retryable,
            retry_after=getattr(exc, "retry_after", None) or 1)), read and exc.retryable
    raised = f"{type(exc).__name__}: {exc}"
    if read:
        return Execution("failed", problem=problem(
            TOOL_ERROR, f"{tool!r} raised an error (the audit log has it)", retryable=True,
            retry_after=1), internal=raised), True
    return unknown_outcome(tool, "raised an error (the audit log has it)",
                           internal=raised), False


def unknown_outcome(tool: str, what: str, *, internal: str | None = None) -> Execution:
    """A write that may have acted: no retry, a person resolves its key."""
    return Execution("side_effect_unknown", problem=problem(
        SIDE_EFFECT_UNKNOWN,
        f"the write {tool!r} {what} after it may have acted; it will not run again with "
        "this idempotency key until someone checks the system it writes to and resolves "
        "the key (POST /v1/tools/{name}/executions/{key}/resolve)", owner=True),
        internal=internal)


def _fitted(done: Execution, output: type[BaseModel], *, tool: str, kind: Kind) -> Execution:
    """`done` with its result as the output model holds it, or the outcome that says it
    did not fit (the payload itself never goes back)."""
    try:
        fitted = output.model_validate(done.result).model_dump(mode="json")
    except ValidationError as exc:
        where = ", ".join(sorted({"/" + "/".join(map(str, e["loc"])) for e in exc.errors()}))
        internal = f"the result does not fit {output.__name__}: {exc}"
        if kind == "read":
            return replace(done, outcome="failed", result=None, internal=internal,
                           problem=problem(TOOL_OUTPUT_INVALID,
                                           f"{tool!r} returned a result that does not fit "
                                           f"its output contract (at {where})",
                                           retryable=True, retry_after=1))
        return replace(done, outcome="side_effect_unknown", result=None, internal=internal,
                       problem=problem(TOOL_OUTPUT_INVALID,
                                       f"the write {tool!r} acted and returned a result that "
                                       f"does not fit its output contract (at {where}); "
                                       "check the system it writes to and resolve the key "
                                       "(POST /v1/tools/{name}/executions/{key}/resolve)",
                                       owner=True))
    return replace(done, result=fitted)
