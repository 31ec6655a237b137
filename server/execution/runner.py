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
on; an async handler is cancelled."""

from __future__ import annotations

import asyncio
import inspect
import time
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from contracts import ExecutionSpec, HttpHandler, Kind, Partial, ToolContext, ToolFailed

Status = Literal["succeeded", "partial", "failed", "timed_out", "side_effect_unknown",
                 "approval_required", "denied"]


@dataclass(frozen=True)
class Execution:
    outcome: Status
    result: Any = None
    problem: dict[str, Any] | None = None
    attempts: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "result": self.result, "problem": self.problem,
                "attempts": self.attempts, "seconds": round(self.seconds, 6)}


def problem(slug: str, title: str, detail: str, *, retryable: bool = False) -> dict[str, Any]:
    return {"type": f"urn:strictcall:problem:{slug}", "title": title, "detail": detail,
            "retryable": retryable}


class _MayHaveActed(Exception):
    """The handler failed in a way that does not say whether it acted."""


class Runner:
    def __init__(self, http: httpx.AsyncClient) -> None:
        self._http = http

    async def run(self, spec: ExecutionSpec, arguments: dict[str, Any], *, kind: Kind,
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
                         time.perf_counter() - started)

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
                    "tool-timed-out", "Tool timed out", f"{ctx.tool!r} did not answer within "
                    f"{spec.timeout_s:g} s", retryable=True)), True
            return _unknown(ctx.tool, f"did not answer within {spec.timeout_s:g} s"), False
        except ToolFailed as exc:
            return Execution("failed", problem=problem(
                "tool-failed", "Tool failed", exc.detail, retryable=exc.retryable)), \
                read and exc.retryable
        except Exception as exc:  # noqa: BLE001 - a handler's crash is an outcome, not a 500
            if read:
                return Execution("failed", problem=problem(
                    "tool-error", "Tool error", f"{ctx.tool!r} raised "
                    f"{type(exc).__name__}: {exc}", retryable=True)), True
            return _unknown(ctx.tool, f"raised {type(exc).__name__}: {exc}"), False
        if isinstance(value, Partial):
            return Execution("partial", value.result, problem(
                "tool-partial", "Tool did part of the work", value.detail)), False
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
        except httpx.ConnectError as exc:  # never reached the endpoint: nothing was done
            raise ToolFailed(f"cannot reach {handler.url}: {exc}", retryable=True) from None
        except httpx.TimeoutException:
            raise
        except httpx.HTTPError as exc:
            raise _MayHaveActed(f"{handler.url}: {type(exc).__name__}: {exc}") from None
        if resp.status_code >= 500:
            raise _MayHaveActed(f"{handler.url} answered {resp.status_code}")
        if resp.status_code >= 400:
            raise ToolFailed(f"{handler.url} answered {resp.status_code}: {resp.text[:300]}")
        try:
            value = resp.json()
        except ValueError:
            return resp.text
        if isinstance(value, dict) and value.get("status") == "partial":
            return Partial(value, str(value.get("detail", "the endpoint did part of it")))
        return value


def _unknown(tool: str, what: str) -> Execution:
    return Execution("side_effect_unknown", problem=problem(
        "side-effect-unknown", "Side effect unknown",
        f"the write {tool!r} {what} after it may have acted; it will not run again with "
        "this idempotency key until someone checks the system it writes to and resolves "
        "the key (POST /v1/tools/{name}/executions/{key}/resolve)"))
