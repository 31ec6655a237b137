"""`Gate`: the ASGI middleware every request passes before any route sees it.

In order: a request id (the client's `X-Request-Id`, or a new one) echoed on the response
and put on every log line of the request; 503 while the server shuts down; the API key
(401 / 403) when keys are on, and the key's rate limit (429); the body, read up to its size
limit (413) and checked for lone surrogates (400); a place among the generation requests
(429, or 503 when the engine is down). Refusals are rendered by the one renderer
(server/api/errors.py)."""

from __future__ import annotations

import contextvars
import json
import logging
import re
import time
import uuid
from typing import Any

from starlette.requests import Request

from server.api.errors import render, speaks_anthropic
from server.errors import (
    BodyTooLarge,
    Forbidden,
    InvalidRequest,
    ServiceError,
    Unauthenticated,
    Unavailable,
)
from server.identity import Identity, KeyRing, Right

GENERATION_ROUTES = ("/v1/chat/completions", "/v1/messages", "/v1/responses")
REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
# Echoed ids go into log lines and headers: printable, short, no spaces.
_GOOD_ID = re.compile(r"[A-Za-z0-9._:/+=-]{1,128}")
# A JSON escape of a UTF-16 surrogate; only bodies with one are parsed here.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class RequestIdFilter(logging.Filter):
    """Puts the request id (or "-" outside a request) on a record as `request_id`."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = REQUEST_ID.get()
        return True


class Gate:
    def __init__(self, app: Any, *, keys: KeyRing | None, metrics_auth: bool,
                 max_body_bytes: int) -> None:
        self.app = app
        self.keys = keys
        self.metrics_auth = metrics_auth
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _request_id(scope)
        scope.setdefault("state", {}).update(request_id=request_id, started=time.monotonic())
        token = REQUEST_ID.set(request_id)
        try:
            await self._pass(scope, receive, _echoing(send, request_id))
        finally:
            REQUEST_ID.reset(token)

    async def _pass(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        admission = None
        try:
            if getattr(scope["app"].state, "shutdown_deadline", None) is not None:
                raise Unavailable("the server is shutting down; retry (another replica, or "
                                  "this one once restarted, can answer)")
            identity = scope["state"]["identity"] = self._identify(scope)
            limiter = getattr(scope["app"].state, "rate_limits", None)
            if identity is not None and limiter is not None and \
                    _right_for(scope["path"], metrics_auth=self.metrics_auth) == "chat":
                await limiter.acquire(identity)  # before the body: a refused client sends no more
            body = await self._body(scope, receive)
            if body is None:
                return  # the client left while sending
            _refuse_lone_surrogates(body)
            if scope["path"] in GENERATION_ROUTES:
                admission = scope["app"].state.admission
                admission.enter()
        except ServiceError as error:
            await render(error, Request(scope))(scope, receive, send)
            return
        try:
            await self.app(scope, _replay(body, receive), send)
        finally:
            if admission is not None:
                admission.leave()

    def _identify(self, scope: dict[str, Any]) -> Identity | None:
        path = scope["path"]
        right = _right_for(path, metrics_auth=self.metrics_auth)
        if self.keys is None or right is None:
            return None
        presented = _presented_key(scope)
        how = "`Authorization: Bearer <key>`" + (" or `x-api-key: <key>`"
                                                 if speaks_anthropic(path) else "")
        if presented is None:
            raise Unauthenticated(f"this server needs an API key: send {how}")
        identity = self.keys.identify(presented)
        if identity is None:
            raise Unauthenticated(f"the API key is not one this server knows; send a valid "
                                  f"key with {how}")
        if not identity.may(right):
            raise Forbidden(f"the key {identity.name!r} (roles {list(identity.roles)}) may not "
                            f"call {path}: that needs the role {right!r} or 'admin'")
        return identity

    async def _body(self, scope: dict[str, Any], receive: Any) -> bytes | None:
        """The whole body, or a 413 as soon as it is known to be over the limit."""
        limit = self.max_body_bytes
        declared = _header(scope, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise BodyTooLarge(f"the request body is {int(declared)} bytes; this server takes "
                               f"at most {limit}")
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise BodyTooLarge(f"the request body is over this server's limit of {limit} "
                                   "bytes")
            chunks.append(chunk)
            if not message.get("more_body"):
                return b"".join(chunks)


def _right_for(path: str, *, metrics_auth: bool) -> Right | None:
    """What a route needs from a key; None: open to anyone."""
    if path == "/health":
        return None  # probes carry no keys
    if path == "/metrics":
        return "metrics" if metrics_auth else None
    return "chat"


def _presented_key(scope: dict[str, Any]) -> str | None:
    auth = _header(scope, b"authorization")
    if auth is not None:
        scheme, _, token = auth.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    if speaks_anthropic(scope["path"]):  # the anthropic SDK sends its key this way
        return _header(scope, b"x-api-key")
    return None


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _request_id(scope: dict[str, Any]) -> str:
    sent = _header(scope, b"x-request-id")
    return sent if sent is not None and _GOOD_ID.fullmatch(sent) else uuid.uuid4().hex


def _echoing(send: Any, request_id: str) -> Any:
    async def echo(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            headers = [h for h in message.get("headers", []) if h[0].lower() != b"x-request-id"]
            message = {**message, "headers": [*headers, (b"x-request-id", request_id.encode())]}
        await send(message)
    return echo


def _replay(body: bytes, receive: Any) -> Any:
    """The body once, as read; then the client's own messages (its disconnect)."""
    sent = False

    async def replayed() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()
    return replayed


def _refuse_lone_surrogates(body: bytes) -> None:
    """A lone UTF-16 surrogate (`"a\\ud800b"`) is legal JSON but no Unicode text: no
    tokenizer can read it. Refused with the path, not replaced: a replacement character
    would change what the client asked without a word, and the client's encoder is what
    needs fixing."""
    if not _SURROGATE_ESCAPE.search(body):
        return
    try:
        parsed = json.loads(body)
    except ValueError:
        return  # not JSON: the route says so
    path = _surrogate_path(parsed)
    if path is not None:
        raise InvalidRequest(f"{path or 'the body'} holds a lone UTF-16 surrogate escape "
                             "(\\ud800-\\udfff without its pair), which is not Unicode text; "
                             "send the character it stands for, or remove it",
                             param=path or None, code="invalid_unicode")


def _surrogate_path(value: Any) -> str | None:
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            if any("\ud800" <= ch <= "\udfff" for ch in item):
                return where
        elif isinstance(item, dict):
            for key, sub in reversed(list(item.items())):
                if any("\ud800" <= ch <= "\udfff" for ch in key):
                    return where or key.encode("utf-8", "backslashreplace").decode()
                stack.append((f"{where}.{key}" if where else key, sub))
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", sub) for i, sub in reversed(list(enumerate(item))))
    return None
