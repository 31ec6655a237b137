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

A sync handler runs on a worker thread: on a timeout the thread cannot be stopped and runs
on; an async handler is cancelled.

What a handler returns goes back only if it fits the contract's `output` model (where it
has one): a read whose result does not fit has `failed`; a write that acted and returned
something else is `side_effect_unknown`. Never the raw payload: neither that, nor an
exception's text or an HTTP error body, reaches the client or the model; they are kept, as
`internal`, for the audit log. Every problem says whether a retry may help (`retryable`,
`retry_after` where known) and whether a person must act (`owner_action_required`)."""

from __future__ import annotations

import asyncio
import inspect
import time
from dataclasses import dataclass, replace
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


class Runner:
    def __init__(self, http: httpx.AsyncClient) -> None:
        self._http = http

    async def run(self, spec: ExecutionSpec, arguments: dict[str, Any], *, kind: Kind,
                  context: ToolContext, output: type[BaseModel] | None = None) -> Execution:
        done = await self._run(spec, arguments, kind=kind, context=context)
        if output is None or done.outcome not in ("succeeded", "partial"):
            return done
        return _fitted(done, output, tool=context.tool, kind=kind)

    async def _run(self, spec: ExecutionSpec, arguments: dict[str, Any], *, kind: Kind,
                   context: ToolContext) -> Execution:
        started = time.perf_counter()
        tries = 1 + (spec.retries if kind == "read" else 0)  # writes: never retried blindly
        attempt, last = 0, Execution("failed")
        for attempt in range(1, tries + 1):
            ctx = ToolContext(context.tool, context.idempotency_key, context.tenant,
                              context.roles, attempt)
            last, retry = await self._attempt(spec, arguments, kind, ctx)
            if not retry:
                break
        return Execution(last.outcome, last.result, last.problem, attempt,
                         time.perf_counter() - started, last.internal)

    async def _attempt(self, spec: ExecutionSpec, arguments: dict[str, Any], kind: Kind,
                       ctx: ToolContext) -> tuple[Execution, bool]:
        """One try: its outcome, and whether another try may help (reads only)."""
        read = kind == "read"
        try:
            value = await asyncio.wait_for(self._call(spec.handler, arguments, ctx),
                                           spec.timeout_s)
        except (TimeoutError, httpx.TimeoutException):
            if read:
                return Execution("timed_out", problem=problem(
                    TOOL_TIMED_OUT, f"{ctx.tool!r} did not answer within "
                    f"{spec.timeout_s:g} s", retryable=True, retry_after=1)), True
            return unknown_outcome(ctx.tool, f"did not answer within {spec.timeout_s:g} s"), False
        except _Refused as exc:  # an HTTP endpoint's 4xx: its body is the audit's only
            return Execution("failed", problem=problem(
                TOOL_FAILED, exc.public), internal=exc.internal), False
        except ToolFailed as exc:  # the handler's own words, written for the caller
            return Execution("failed", problem=problem(
                TOOL_FAILED, exc.detail, retryable=exc.retryable,
                retry_after=1)), read and exc.retryable
        except Exception as exc:  # noqa: BLE001 - a handler's crash is an outcome, not a 500
            raised = f"{type(exc).__name__}: {exc}"
            if read:
                return Execution("failed", problem=problem(
                    TOOL_ERROR, f"{ctx.tool!r} raised an error (the audit "
                    "log has it)", retryable=True, retry_after=1), internal=raised), True
            return unknown_outcome(ctx.tool, "raised an error (the audit log has it)",
                            internal=raised), False
        if isinstance(value, Partial):
            return Execution("partial", value.result, problem(
                TOOL_PARTIAL, value.detail)), False
        return Execution("succeeded", value), False

    async def _call(self, handler: Any, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        if isinstance(handler, HttpHandler):
            return await self._post(handler, arguments, ctx)
        if inspect.iscoroutinefunction(handler) or \
                inspect.iscoroutinefunction(type(handler).__call__):
            return await handler(dict(arguments), ctx)
        value = await asyncio.to_thread(handler, dict(arguments), ctx)
        return await value if inspect.isawaitable(value) else value

    async def _post(self, handler: HttpHandler, arguments: dict[str, Any],
                    ctx: ToolContext) -> Any:
        headers = dict(handler.headers)
        if ctx.idempotency_key is not None:
            headers["Idempotency-Key"] = ctx.idempotency_key
        body = {"tool": ctx.tool, "arguments": arguments,
                "idempotency_key": ctx.idempotency_key}
        try:
            resp = await self._http.post(handler.url, json=body, headers=headers)
        except httpx.ConnectError:  # never reached the endpoint: nothing was done
            raise ToolFailed(f"the tool's endpoint cannot be reached ({ctx.tool!r})",
                             retryable=True) from None
        except httpx.TimeoutException:
            raise
        except httpx.HTTPError as exc:
            raise _MayHaveActed(f"{handler.url}: {type(exc).__name__}: {exc}") from None
        if resp.status_code >= 500:
            raise _MayHaveActed(f"{handler.url} answered {resp.status_code}: {resp.text[:300]}")
        if resp.status_code >= 400:
            raise _Refused(f"the tool's endpoint refused the call ({resp.status_code})",
                           f"{handler.url} answered {resp.status_code}: {resp.text[:300]}")
        try:
            value = resp.json()
        except ValueError:
            return resp.text
        if isinstance(value, dict) and value.get("status") == "partial":
            return Partial(value, str(value.get("detail", "the endpoint did part of it")))
        return value


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
