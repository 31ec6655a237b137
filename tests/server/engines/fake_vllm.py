"""FakeVllm: a scripted stand-in for `vllm serve`'s `GET /v1/models`, `POST /tokenize`,
streamed `POST /v1/completions` and the prober's one-token decode, as an httpx transport
(the engine's sync prober and its async client both take one), for fast tests of the
upstream engine's wire and failure handling. It tokenizes its reply with the real
tokenizer and streams one token per chunk, the way vLLM does with `return_token_ids`.
The real server is tested in the `replicas` tier."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

Reply = Callable[[dict[str, Any]], str]  # the request body -> the text to stream


@dataclass
class FakeVllm:
    tokenizer: Any
    reply: Reply = lambda body: '{"name":"Alice"}'
    model: str = "fake-model"
    max_model_len: int = 2048
    # "ok", "refuse" (no connection), "status:<code>", "die_after:<n>" (n tokens, then the
    # connection breaks), "error_event" (an error chunk before any token), "garbage" (a
    # line that is no vLLM event before any token), "slow" (no first token within the
    # read timeout: httpx's ReadTimeout, as its network transport raises it).
    mode: str = "ok"
    other_tokenizer: Any = None  # /tokenize answers with this one (another model served)
    delay_s: float = 0.0  # between chunks
    bodies: list[dict[str, Any]] = field(default_factory=list)
    streams_closed_early: int = 0
    probes: int = 0
    decode_probes: int = 0

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self._handle)

    def _handle(self, request: httpx.Request) -> httpx.Response:
        if self.mode == "refuse":
            raise httpx.ConnectError("connection refused", request=request)
        if request.url.path == "/v1/models":
            self.probes += 1
            return httpx.Response(200, json={"object": "list", "data": [
                {"id": self.model, "object": "model", "max_model_len": self.max_model_len}]})
        if request.url.path == "/tokenize":
            tokenizer = self.other_tokenizer or self.tokenizer
            text = json.loads(request.content)["prompt"]
            return httpx.Response(200, json={"tokens": tokenizer.encode(
                text, add_special_tokens=False)})
        if self.mode.startswith("status:"):
            code = int(self.mode.split(":")[1])
            return httpx.Response(code, json={"error": {"message": f"fake {code}"}})
        body = json.loads(request.content)
        if not body.get("stream") and "structured_outputs" not in body:  # the prober's
            self.decode_probes += 1
            return httpx.Response(200, json={"choices": [
                {"index": 0, "text": "!", "finish_reason": "length"}]})
        self.bodies.append(body)
        ids = list(self.tokenizer.encode(self.reply(body), add_special_tokens=False))
        ids = ids[:body["max_tokens"]]
        finish = "length" if len(ids) == body["max_tokens"] else "stop"
        if not body.get("stream"):
            return httpx.Response(200, json={"choices": [
                {"index": 0, "text": self.tokenizer.decode(ids), "finish_reason": finish}]})
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              stream=_Chunks(self, ids, finish))


class _Chunks(httpx.AsyncByteStream):
    def __init__(self, fake: FakeVllm, ids: list[int], finish: str) -> None:
        self.fake, self.ids, self.finish = fake, ids, finish
        self.done = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        fake = self.fake
        if fake.mode == "error_event":
            yield _event({"error": {"message": "fake engine error", "code": 500}})
            return
        if fake.mode == "slow":
            raise httpx.ReadTimeout("no first token in time")
        if fake.mode == "garbage":
            yield b'data: {"choices": "not a list of choices"}\n\n'
            return
        limit = int(fake.mode.split(":")[1]) if fake.mode.startswith("die_after:") else None
        eos = fake.tokenizer.eos_token_id
        for i, token in enumerate(self.ids):
            if limit is not None and i >= limit:
                self.done = True
                raise httpx.ReadError("the upstream died")
            yield _event(_chunk([token], fake.tokenizer.decode([token]), None))
            await asyncio.sleep(fake.delay_s)
        last = [eos] if self.finish == "stop" else []
        yield _event(_chunk(last, "", self.finish))
        yield b"data: [DONE]\n\n"
        self.done = True

    async def aclose(self) -> None:
        if not self.done:
            self.fake.streams_closed_early += 1
            self.done = True


def _chunk(ids: list[int], text: str, finish: str | None) -> dict[str, Any]:
    return {"id": "cmpl-fake", "object": "text_completion", "choices": [
        {"index": 0, "text": text, "finish_reason": finish, "stop_reason": None,
         "token_ids": ids}]}


def _event(data: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(data)}\n\n".encode()


def fleet(fakes: dict[str, FakeVllm]) -> httpx.MockTransport:
    """One transport for several fake servers, by URL root (http://host:port)."""
    def handle(request: httpx.Request) -> httpx.Response:
        root = f"{request.url.scheme}://{request.url.host}:{request.url.port}"
        return fakes[root]._handle(request)
    return httpx.MockTransport(handle)
