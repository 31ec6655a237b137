"""The stateful side of the Responses API: `store` (default true, as OpenAI's),
`previous_response_id`, `GET` and `DELETE /v1/responses/{id}` and `GET
/v1/responses/{id}/input_items`, in OpenAI's shapes, over the `ResponseStore` (the state
store: SQLite by default, Postgres for replicas).

A chained request's earlier turns are the previous response's items: what it saw and what
it answered (stored by reference: server/sessions/responses.py). As with OpenAI,
`instructions` and `tools` are not carried over: send them
with each request. A chain is one session (server/sessions): its slots carry each tool's
arguments from turn to turn. `store=false` keeps nothing: no stored response, and its turn
reads and writes no slots (a response not stored cannot be continued), unless the request
names a session itself (`strictcall.session`).

Everything is scoped by the caller's tenant: an id of another tenant's response is
answered as OpenAI answers an unknown one (404 on GET and DELETE; 400
`previous_response_not_found` when chained onto)."""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from fastapi import Depends, Query, Request
from pydantic import TypeAdapter

from server.api.deps import caller_of
from server.api.responses.request import (
    FunctionCallItem,
    FunctionCallOutputItem,
    InputItem,
    MessageItem,
    ResponsesRequest,
)
from server.api.sse import Frame, FrameStream
from server.errors import InvalidRequest, RouteNotFound, ServiceError
from server.sessions import ResponseStore, StoredResponse, scope_of
from server.settings import Settings
from server.state.timed import TimedStateStore

_ITEMS: TypeAdapter[list[InputItem]] = TypeAdapter(list[InputItem])
_FINAL = ("response.completed", "response.incomplete")


@dataclass(frozen=True)
class Earlier:
    """What a request continues: the earlier items (as input items) and its session."""

    items: list[InputItem] = field(default_factory=list)
    raw: list[dict[str, Any]] = field(default_factory=list)  # the same, as stored
    session: str | None = None
    chain: list[str] = field(default_factory=list)  # the stored responses it continues
    reserved: str | None = None  # the write made before the decode (ResponseStore.reserve)


class ResponseLog:
    """One request's view of the stored responses: its tenant's only. Every store call
    runs on the state store's own threads with its deadline (a 503 past it)."""

    def __init__(self, store: ResponseStore, scope: str, state: TimedStateStore,
                 settings: Settings | None = None) -> None:
        self.store = store
        self.scope = scope
        self.state = state
        self.settings = settings  # the chain's bounds (None: unbounded, for tests)

    @classmethod
    def of(cls, request: Request) -> ResponseLog:
        return cls(request.app.state.responses, scope_of(caller_of(request).identity),
                   request.app.state.state, request.app.state.pipeline.settings)

    async def find(self, response_id: str, *, opened: bool = False) -> StoredResponse | None:
        """`opened`: for a response chained onto it (Redact() values as they were)."""
        return await self.state.run(
            functools.partial(self.store.get, opened=opened), self.scope, response_id)

    async def earlier(self, body: ResponsesRequest) -> Earlier:
        """The chain `body` continues, and the session its slots live in. A response to be
        stored first makes one write: a store that cannot take it (full, down) is a 503
        now, before the decode, not after it."""
        kept = body.store is not False
        reserved = await self.state.run(self.store.reserve, self.scope) if kept else None
        if body.previous_response_id is None:
            return Earlier(session=f"sess_{uuid.uuid4().hex}" if kept else None,
                           reserved=reserved)
        found = await self.find(body.previous_response_id, opened=True)
        if found is None:
            raise InvalidRequest(
                f"Previous response with id {body.previous_response_id!r} not found: it was "
                "not stored (store=false), has expired or was deleted, or is not this "
                "tenant's; send the earlier turns in `input` instead",
                param="previous_response_id", code="previous_response_not_found")
        raw = found.conversation()
        self._bounded(found, raw)
        return Earlier(_ITEMS.validate_python(raw), raw, found.session if kept else None,
                       [*found.chain, body.previous_response_id], reserved)

    def _bounded(self, found: StoredResponse, raw: list[Any]) -> None:
        """A chain is bounded in depth (--max-chain) and in what it stores (--max-body-bytes,
        which a client sending the turns itself would meet): its reasoning items and tool
        results count, though the prompt leaves some out, so a long chain cannot grow
        without end under the context check."""
        settings = self.settings
        if settings is None:
            return
        if len(found.chain) + 1 >= settings.max_chain:
            raise InvalidRequest(
                f"previous_response_id continues a chain of {len(found.chain) + 1} responses, "
                f"and this server keeps chains of {settings.max_chain} at most; start a new "
                "one, sending the turns you need in `input`", param="previous_response_id",
                code="chain_too_long")
        size = len(json.dumps(raw, ensure_ascii=False).encode())
        if size > settings.max_body_bytes:
            raise InvalidRequest(
                f"previous_response_id continues a chain whose items hold {size} bytes, more "
                f"than the {settings.max_body_bytes} a request may; start a new one, sending "
                "the turns you need in `input`", param="previous_response_id",
                code="chain_too_long")

    async def keep(self, body: ResponsesRequest, response: dict[str, Any],
                   earlier: Earlier) -> None:
        """Store the response (unless store=false) with its own input and the ids of the
        responses it continues."""
        if body.store is False:
            return
        stored = StoredResponse(response, [], input_items(body), earlier.session,
                                earlier.chain)
        await self.state.run(self.store.keep, self.scope, stored, reserved=earlier.reserved)


def input_items(body: ResponsesRequest) -> list[dict[str, Any]]:
    """The request's input as stored items, each with an id, in OpenAI's item shapes."""
    if isinstance(body.input, str):
        return [_message("user", [{"type": "input_text", "text": body.input}])]
    out = []
    for item in body.input:
        raw = item.model_dump(exclude_none=True, by_alias=True)
        if isinstance(item, MessageItem):
            kind = "output_text" if item.role == "assistant" else "input_text"
            parts = [{"type": kind, "text": item.content}] if isinstance(item.content, str) \
                else raw["content"]
            out.append(_message(item.role, parts, item.id))
        else:
            prefix = "fc" if isinstance(item, FunctionCallItem) else \
                "fco" if isinstance(item, FunctionCallOutputItem) else "rs"
            out.append({"id": f"{prefix}_{uuid.uuid4().hex}", "status": "completed", **raw})
    return out


def _message(role: str, content: list[Any], id: str | None = None) -> dict[str, Any]:
    return {"id": id or f"msg_{uuid.uuid4().hex}", "type": "message", "role": role,
            "content": content, "status": "completed"}


class KeptEvents:
    """A Responses stream that stores its response once it is whole, before the last
    event goes out (a client chaining onto it at once finds it)."""

    def __init__(self, inner: FrameStream, keep: Callable[[dict[str, Any]], Awaitable[None]]
                 ) -> None:
        self.inner = inner
        self.keep = keep

    done = None

    async def frames(self) -> AsyncIterator[Frame]:
        async for frame in self.inner.frames():
            if frame.event in _FINAL:
                await self.keep(frame.data["response"])
            yield frame

    def error(self, error: ServiceError, path: str) -> Frame:
        return self.inner.error(error, path)


# -- the routes ------------------------------------------------------------------------------

LogDep = Annotated[ResponseLog, Depends(ResponseLog.of)]


async def get_response(response_id: str, log: LogDep,
                       stream: Annotated[bool, Query()] = False) -> dict[str, Any]:
    if stream:
        raise InvalidRequest("stream=true replays a background response; this server has no "
                             "background responses: GET it without stream", param="stream")
    return (await _stored(log, response_id)).response


async def delete_response(response_id: str, log: LogDep) -> dict[str, Any]:
    deleted = await log.state.run(log.store.delete, log.scope, response_id)
    if not deleted:
        raise _not_found(response_id)
    return {"id": response_id, "object": "response.deleted", "deleted": True}


async def list_input_items(
        response_id: str, log: LogDep,
        limit: Annotated[int, Query(ge=1, le=100)] = 20,
        order: Annotated[Literal["asc", "desc"], Query()] = "desc",
        after: Annotated[str | None, Query(max_length=128)] = None,
        before: Annotated[str | None, Query(max_length=128)] = None) -> dict[str, Any]:
    """The items the model saw for this response (earlier turns included), OpenAI's
    cursor page: `after` / `before` an item id, in `order`."""
    items = (await _stored(log, response_id)).input_items()
    if order == "desc":
        items.reverse()
    ids = [str(i.get("id")) for i in items]
    for cursor, name in ((after, "after"), (before, "before")):
        if cursor is not None and cursor not in ids:
            raise InvalidRequest(f"{name}={cursor!r} is no item of response {response_id!r}; "
                                 "send an id from an earlier page", param=name)
    start = ids.index(after) + 1 if after is not None else 0
    end = ids.index(before) if before is not None else len(items)
    page = items[start:end][:limit]
    return {"object": "list", "data": page,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
            "has_more": start + len(page) < end}


async def _stored(log: ResponseLog, response_id: str) -> StoredResponse:
    found = await log.find(response_id)
    if found is None:
        raise _not_found(response_id)
    return found


def _not_found(response_id: str) -> RouteNotFound:
    return RouteNotFound(f"Response with id {response_id!r} not found.")
