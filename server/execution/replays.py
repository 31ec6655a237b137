"""Idempotent answers: a Chat Completions, Responses or Messages request sent with an
`Idempotency-Key` header has its answer stored under the key, so the client's retry (a
timeout, a dropped connection) gets the same answer back, with the same call ids and the
same idempotency keys on its write calls: executing the calls of both answers runs each
write once (POST /v1/tools/{name}/invoke keeps one outcome per key).

- The key is the caller's (its tenant, or its API key without one: the owner of its tool
  calls' keys, server/execution/service.py `owner_of`), per route.
- The same key with another request body is a 409 (`idempotency_key_reused`); while the
  first request is still being answered, a retry is a 409 to retry later (`in-progress`).
- Only a 200 is kept; a request that failed (a 4xx, a 503, a client that left) releases the
  key, and the retry runs again.
- A request whose answer never came (the replica died mid-decode) holds its key at most
  `--request-timeout-s` (else 15 minutes): after that the key runs again.
- Stored answers are sealed like a session's values (server/sessions/sealing.py) and kept
  `--idempotency-ttl-s`.
- A streamed request cannot be replayed as the stream it was: `stream: true` with the header
  is a 400 that says so."""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from server.errors import Conflict, InProgress, InvalidRequest
from server.execution.store import RecordStore, Scope, Stored
from server.sessions.sealing import Sealer

HEADER = "idempotency-key"
REPLAYED = "Idempotent-Replayed"
MAX_KEY = 255
ABANDONED_S = 900.0  # a claim this old with no answer is a request that died


class Headers(Protocol):
    """A response's headers (Starlette's MutableHeaders): read, and extended."""

    def items(self) -> Iterable[tuple[str, str]]: ...

    def update(self, other: Mapping[str, str]) -> None: ...


@dataclass(frozen=True)
class Replays:
    records: RecordStore
    sealer: Sealer
    abandoned_s: float = ABANDONED_S

    async def answer(self, key: str, *, route: str, owner: str | None, body: Any,
                     streams: bool, headers: Headers,
                     run: Callable[[], Awaitable[dict[str, Any] | object]]
                     ) -> dict[str, Any] | object:
        """The stored answer for `key` (the same body sent before), or `run()`'s, stored
        (a dict: an answer; anything else, such as a 499 response, is not kept).
        `headers`: the response's, which the kept ones are read from and replayed into."""
        if not key or len(key) > MAX_KEY or not key.isprintable():
            raise InvalidRequest(f"the Idempotency-Key header must be 1 to {MAX_KEY} "
                                 "printable characters", param="Idempotency-Key",
                                 code="invalid_idempotency_key")
        if streams:
            raise InvalidRequest("an Idempotency-Key keeps an answer returned whole; send "
                                 "stream: false with it (or no key to stream)",
                                 param="Idempotency-Key", code="idempotency_key_stream")
        scope = Scope(owner, f"answer:{route}", key)
        fingerprint = hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False,
                                                default=str).encode()).hexdigest()
        token = uuid.uuid4().hex
        found = await asyncio.to_thread(self._claim, scope, fingerprint, token)
        if found is not None:
            return self._replayed(found, scope, fingerprint, headers)
        try:
            answer = await run()
        except BaseException:
            await asyncio.to_thread(self.records.release, scope, token=token)
            raise
        if not isinstance(answer, dict):  # the client left: nothing was answered
            await asyncio.to_thread(self.records.release, scope, token=token)
            return answer
        kept = {k: v for k, v in headers.items() if k.lower().startswith("x-")}
        await asyncio.to_thread(self.records.finish, scope, {
            "answer": self.sealer.seal({"body": answer, "headers": kept})}, token=token)
        return answer

    def _claim(self, scope: Scope, fingerprint: str, token: str) -> Stored | None:
        found = self.records.claim(scope, fingerprint, token=token)
        if found is not None and found.state == "running" \
                and self.records.now() - found.updated > self.abandoned_s:
            self.records.release(scope, token=found.token or "")  # its request died
            found = self.records.claim(scope, fingerprint, token=token)
        return found

    def _replayed(self, found: Stored, scope: Scope, fingerprint: str,
                  headers: Headers) -> dict[str, Any]:
        if found.fingerprint != fingerprint:
            raise Conflict(f"Idempotency-Key {scope.key!r} was sent with another request "
                           "body; use a new key for a new request", param="Idempotency-Key",
                           code="idempotency_key_reused")
        if found.state == "running" or found.outcome is None:
            raise InProgress(f"the request with Idempotency-Key {scope.key!r} is still being "
                             "answered; send it again when it is done",
                             param="Idempotency-Key", code="idempotency_key_in_progress")
        ok, kept = self.sealer.open(found.outcome.get("answer"))
        if not ok:  # sealed by a process without the shared --state-secret
            raise Conflict(f"the answer kept for Idempotency-Key {scope.key!r} cannot be "
                           "read on this replica (no shared --state-secret); use a new key",
                           param="Idempotency-Key", code="idempotency_answer_unreadable")
        headers.update({**kept["headers"], REPLAYED: "true"})
        body: dict[str, Any] = kept["body"]
        return body
