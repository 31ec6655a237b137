"""`Gate`: the ASGI middleware every request passes before any route sees it.

In order: a request id (the client's `X-Request-Id`, or a new one) echoed on the response
and put on every log line of the request; 503 while the server shuts down; the API key
(401 / 403) when keys are on, and the key's rate limit (429); the body, read up to its size
limit (413) and checked for what no reader here takes: lone surrogates, NaN or Infinity,
nesting past MAX_NESTING (400); a place among the generation requests (429, or 503 when the
engine is down). Refusals are rendered by the one renderer (server/api/errors.py).

Slow clients: the body must arrive whole within `read_timeout_s` (408), and each write of
the response must be taken within `write_timeout_s`: a stream whose client stopped reading
is ended there, its decode stopped and its place freed for the next request."""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import math
import re
import time
import uuid
from typing import Any

from starlette.requests import Request

from grammars import has_surrogate, plain_json
from server.api.errors import render, speaks_anthropic
from server.errors import (
    BodyTimeout,
    BodyTooLarge,
    Forbidden,
    InvalidRequest,
    ServiceError,
    Unauthenticated,
    Unavailable,
)
from server.identity import Identity, KeyRing, Right, WatchedKeyRing

log = logging.getLogger("strictcall.api")
# The routes that take an admission place (generation, and the compile endpoint, whose
# grounding and compile are work of the same kind): at most --max-batch + --max-queued.
GENERATION_ROUTES = ("/v1/chat/completions", "/v1/messages", "/v1/responses",
                     "/v1/grammars/compile")
REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
# Echoed ids go into log lines and headers: printable, short, no spaces.
_GOOD_ID = re.compile(r"[A-Za-z0-9._:/+=-]{1,128}")
# What may stand for a value JSON text cannot hold, once Python's parser has read it: a
# surrogate's escape or its bytes (CESU-8, which the parser decodes with surrogatepass), NaN
# and Infinity (which it accepts), a number too large for a float (read as inf). Only
# bodies with one, or in UTF-16/32 (which the parser detects), are parsed here.
# Objects and arrays inside one another in a body: a schema may nest 64 (grammars'
# MAX_NESTING), and requests wrap it in a few more.
MAX_NESTING = 128
_SUSPECT = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}|\xed[\xa0-\xbf]|NaN|Infinity"
                      rb"|[0-9][eE][+-]?[0-9]{3}|[0-9.]{300}")


class RequestIdFilter(logging.Filter):
    """Puts the request id (or "-" outside a request) on a record as `request_id`."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = REQUEST_ID.get()
        return True


class Gate:
    def __init__(self, app: Any, *, keys: KeyRing | WatchedKeyRing | None, metrics_auth: bool,
                 max_body_bytes: int, read_timeout_s: float = 30.0,
                 write_timeout_s: float = 30.0) -> None:
        self.app = app
        self.keys = keys
        self.metrics_auth = metrics_auth
        self.max_body_bytes = max_body_bytes
        self.read_timeout_s = read_timeout_s
        self.write_timeout_s = write_timeout_s

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _request_id(scope)
        ends: list[Any] = []  # what stops the request's work when its response ends
        scope.setdefault("state", {}).update(request_id=request_id, started=time.monotonic(),
                                             on_end=ends)
        token = REQUEST_ID.set(request_id)
        try:
            await self._pass(scope, receive, _echoing(send, request_id))
        finally:
            for stop in ends:
                stop()
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
            _refuse_what_json_cannot_hold(body)
            if scope["path"] in GENERATION_ROUTES:
                admission = scope["app"].state.admission
                admission.enter()
        except ServiceError as error:
            await render(error, Request(scope))(scope, receive, send)
            return
        try:
            await self.app(scope, _replay(body, receive), _deadlined(send, self.write_timeout_s))
        except ClientStalled:
            log.warning("ended a response whose client took nothing for %g s (%s); its place "
                        "is free", self.write_timeout_s, scope["path"])
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
        deadline = time.monotonic() + self.read_timeout_s
        while True:
            try:
                message = await asyncio.wait_for(receive(), deadline - time.monotonic())
            except TimeoutError:
                raise BodyTimeout(f"the request body did not arrive whole within "
                                  f"{self.read_timeout_s:g} s; send it at once") from None
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
    if path in ("/health", "/livez"):
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
            return str(value.decode("latin-1"))
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


class ClientStalled(Exception):
    """The client took no part of the response within the write deadline."""


def _deadlined(send: Any, timeout_s: float) -> Any:
    """`send` that gives up (ClientStalled) when the client takes nothing for `timeout_s`:
    the server's buffers toward it are full and it is not reading."""
    async def bounded(message: dict[str, Any]) -> None:
        try:  # a timeout scope, not a task: a cancellation reaches `send` as it always did
            async with asyncio.timeout(timeout_s):
                await send(message)
        except TimeoutError:
            raise ClientStalled from None
    return bounded


def _replay(body: bytes, receive: Any) -> Any:
    """The body once, as read; then the client's own messages (its disconnect)."""
    sent = False

    async def replayed() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        message: dict[str, Any] = await receive()
        return message
    return replayed


def _refuse_what_json_cannot_hold(body: bytes) -> None:
    """A lone UTF-16 surrogate (`"a\\ud800b"`) is legal JSON but no Unicode text: no
    tokenizer can read it, no encoder write it. Refused with the path, not replaced: a
    replacement character would change what the client asked without a word, and the
    client's encoder is what needs fixing. NaN and Infinity are no JSON at all, yet Python
    reads them. Nesting past MAX_NESTING: every reader behind this one recurses. Every
    field of every route is checked here, once, before any route sees it."""
    containers = body.count(b"[") + body.count(b"{")  # nesting is at most this
    if containers <= MAX_NESTING and not _SUSPECT.search(body) \
            and json.detect_encoding(body) == "utf-8":
        return
    try:
        parsed = json.loads(body)
    except RecursionError:
        raise InvalidRequest(f"the body nests objects and arrays more than {MAX_NESTING} "
                             "deep; flatten it", code="too_deep") from None
    except ValueError:
        return  # not JSON: the route says so
    found = None if plain_json(parsed, MAX_NESTING) else _unwritable(parsed)
    if found is None:
        return
    path, why, value = found
    where = path or "the body"
    if why == "surrogate":
        raise InvalidRequest(f"{where} holds a lone UTF-16 surrogate (\\ud800-\\udfff "
                             "without its pair), which is not Unicode text; send the "
                             "character it stands for, or remove it",
                             param=path or None, code="invalid_unicode")
    if why == "number":
        raise InvalidRequest(f"{where} is {value!r} (NaN, Infinity or a number too large for "
                             "a float), which JSON has no way to write; send a finite number",
                             param=path or None, code="invalid_number")
    raise InvalidRequest(f"{where} nests objects and arrays more than {MAX_NESTING} deep "
                         "(counted from the body); flatten it", param=path or None,
                         code="too_deep")


def _unwritable(value: Any) -> tuple[str, str, Any] | None:
    """The first (path, why, value) no reader here takes: a string or key with a lone
    surrogate ("surrogate"), a float that is not finite ("number"), a container nested past
    MAX_NESTING ("deep")."""
    stack: list[tuple[str, Any, int]] = [("", value, 0)]
    while stack:
        where, item, depth = stack.pop()
        if isinstance(item, (dict, list)) and depth >= MAX_NESTING:
            return where, "deep", None
        if isinstance(item, str):
            if has_surrogate(item):
                return where, "surrogate", item
        elif isinstance(item, float):
            if not math.isfinite(item):
                return where, "number", item
        elif isinstance(item, dict):
            for key, sub in reversed(list(item.items())):
                if has_surrogate(key):
                    return where or key.encode("utf-8", "backslashreplace").decode(), \
                        "surrogate", key
                stack.append((f"{where}.{key}" if where else key, sub, depth + 1))
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", sub, depth + 1)
                         for i, sub in reversed(list(enumerate(item))))
    return None
