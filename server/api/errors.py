"""The one renderer for every service error (4xx and 5xx) as application/problem+json."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from server.errors import InvalidRequest, RouteNotFound, ServiceError

log = logging.getLogger("strictcall.api")
PROBLEM = "application/problem+json"


def render(error: ServiceError, request: Request) -> JSONResponse:
    metrics = getattr(request.app.state, "metrics", None)
    if metrics is not None:
        metrics.reject(error.code or error.slug)
    headers = {"Retry-After": str(error.retry_after_s)} if error.retryable else None
    return JSONResponse(error.problem(request.url.path), status_code=error.status,
                        media_type=PROBLEM, headers=headers)


def install(app: FastAPI) -> None:
    @app.exception_handler(ServiceError)
    async def _service(request: Request, exc: ServiceError) -> JSONResponse:
        return render(exc, request)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return render(_from_validation(exc), request)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 404:
            return render(RouteNotFound(f"no route {request.method} {request.url.path}"),
                          request)
        error = InvalidRequest(str(exc.detail))
        error.status = exc.status_code
        return render(error, request)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s", request.url.path)
        return render(ServiceError("internal error; the server log has the details"), request)


def _from_validation(exc: RequestValidationError) -> InvalidRequest:
    errors = exc.errors()
    first = errors[0] if errors else {"loc": (), "msg": "invalid body", "type": ""}
    loc = [str(p) for p in first.get("loc", ()) if p != "body"]
    param = _param(loc)
    if first.get("type") == "extra_forbidden":
        detail = f"unknown field {param!r}; remove it (see the OpenAI chat completions API)"
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
        elif part in ("SystemMessage", "UserMessage", "AssistantMessage", "ToolMessage") \
                or part.startswith(("function-", "literal[", "str", "list[")):
            continue  # pydantic's union-branch labels say nothing to a client
        else:
            out += f".{part}" if out else part
    return out


def _plain(error: dict) -> dict:
    return {"param": _param([str(p) for p in error.get("loc", ()) if p != "body"]),
            "message": error.get("msg", "")}
