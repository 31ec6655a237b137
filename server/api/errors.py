"""The one renderer for every service error (4xx and 5xx): application/problem+json with
OpenAI's `error` object, or Anthropic's error body on the routes of the Messages API."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server.errors import InvalidRequest, RouteNotFound, ServiceError

log = logging.getLogger("strictcall.api")
PROBLEM = "application/problem+json"
# Routes whose clients (the `anthropic` SDK) read Anthropic's error body.
ANTHROPIC_ROUTES = ("/v1/messages",)


def speaks_anthropic(path: str) -> bool:
    return any(path == r or path.startswith(r + "/") for r in ANTHROPIC_ROUTES)


def body_of(error: ServiceError, path: str) -> dict[str, Any]:
    """The error body the route's API defines (also for an error event mid-stream)."""
    if speaks_anthropic(path):
        return error.anthropic_error(path)
    return error.problem(path)


def render(error: ServiceError, request: Request) -> JSONResponse:
    metrics = getattr(request.app.state, "metrics", None)
    if metrics is not None:
        metrics.reject(error.code or error.slug)
    path = request.url.path
    return JSONResponse(body_of(error, path), status_code=error.status,
                        headers=error.headers() or None,
                        media_type="application/json" if speaks_anthropic(path) else PROBLEM)


def install(app: FastAPI) -> None:
    @app.exception_handler(ServiceError)
    async def _service(request: Request, exc: ServiceError) -> JSONResponse:
        return render(exc, request)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return render(_from_validation(exc, request.url.path), request)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 404:
            return render(RouteNotFound(f"no route {request.method} {request.url.path}"),
                          request)
        error = InvalidRequest(str(exc.detail))
        error.status = exc.status_code
        return render(error, request)

    # Innermost, so the 500 carries the request id and is counted like any answer; and
    # outermost too, for an error in the middlewares themselves.
    app.user_middleware.append(Middleware(AnswerUnexpected))
    app.add_middleware(AnswerUnexpected)


class AnswerUnexpected:
    """ASGI middleware: an exception no handler took is logged and answered with the 500
    problem, and goes no further. Starlette's ServerErrorMiddleware answers it too, but then
    re-raises it for the server to log, and uvicorn closes the connection: the client's
    next, well-formed request on its kept-alive connection would fail. Once a response has
    started (a stream), the exception goes on: that response cannot be finished."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except Exception:
            if started:
                raise
            request = Request(scope)
            log.exception("unhandled error on %s", request.url.path)
            error = ServiceError("internal error; the server log has the details")
            await render(error, request)(scope, receive, send)


def _from_validation(exc: RequestValidationError, path: str) -> InvalidRequest:
    errors = exc.errors()
    # The deepest location is the most specific: a text block without `text` fails both
    # `content: str` (at .content) and the block (at .content[0].text); the block says why.
    first = max(errors, key=lambda e: len(e.get("loc", ()))) if errors \
        else {"loc": (), "msg": "invalid body", "type": ""}
    loc = [str(p) for p in first.get("loc", ()) if p != "body"]
    param = _param(loc)
    if first.get("type") == "extra_forbidden":
        api = "the Anthropic Messages API" if speaks_anthropic(path) \
            else "the OpenAI Responses API" if path == "/v1/responses" \
            else "the OpenAI chat completions API"
        detail = f"unknown field {param!r}; remove it (see {api})"
    elif first.get("type") == "json_invalid":
        detail = "the request body is not valid JSON"
    else:
        detail = f"{param or 'body'}: {first.get('msg')}"
    if len(errors) > 1:
        detail += f" (and {len(errors) - 1} more problem(s))"
    return InvalidRequest(detail, param=param or None,
                          extensions={"errors": [_plain(e) for e in errors[:20]]})


def _param(loc: list[str]) -> str:
    out = ""
    for part in loc:
        if part.isdigit():
            out += f"[{part}]"
        elif part[:1].isupper() or part in ("str", "int", "float", "bool", "none") \
                or part.startswith(("function-", "literal[", "list[", "dict[", "type=")):
            continue  # union-branch labels (class names, `type=` tags) say nothing to a client
        else:
            out += f".{part}" if out else part
    return out


def _plain(error: dict[str, Any]) -> dict[str, Any]:
    return {"param": _param([str(p) for p in error.get("loc", ()) if p != "body"]),
            "message": error.get("msg", "")}
