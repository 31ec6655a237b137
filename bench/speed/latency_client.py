"""One streamed chat request, timed: time to the first token (the first chunk that carries
content, reasoning or a tool-call fragment), end to end, and what the answer came to.

Tokens: the usage chunk's counts where the server sends one (`stream_options`); else the
chunks that carried output, one token each (how llama.cpp's and vLLM's servers stream)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.serve.validity import Answer


@dataclass
class Timed:
    """A request's clock and counts (None where the server did not say)."""

    answer: Answer
    ttft_s: float | None = None
    e2e_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    tokens_from: str = "usage"  # or "chunks"

    @property
    def tpot_s(self) -> float | None:
        """Seconds per output token after the first one."""
        if self.ttft_s is None or self.e2e_s is None or not self.completion_tokens \
                or self.completion_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.completion_tokens - 1)


@dataclass
class ChatStream:
    """A chat completion's SSE events as they arrive (`add`); `times`: when each chunk that
    carried output came (perf_counter seconds)."""

    content: list[str] = field(default_factory=list)
    calls: dict[int, list[str]] = field(default_factory=dict)  # index -> [name, arguments]
    finish: str | None = None
    usage: dict[str, Any] | None = None
    output_chunks: int = 0
    first_at: float | None = None
    error: str | None = None
    times: list[float] = field(default_factory=list)
    done: bool = False  # `data: [DONE]` came

    def add(self, event: dict[str, Any], now: float) -> None:
        if "choices" not in event and "usage" not in event:  # an error event mid-stream
            self.error = f"stream error event: {json.dumps(event)[:300]}"
            return
        if event.get("usage"):
            self.usage = event["usage"]
        for choice in event.get("choices") or []:
            delta = choice.get("delta") or {}
            carried = bool(delta.get("reasoning_content") or delta.get("reasoning"))
            if delta.get("content"):
                self.content.append(delta["content"])
                carried = True
            for call in delta.get("tool_calls") or []:
                slot = self.calls.setdefault(int(call.get("index", 0)), ["", ""])
                function = call.get("function") or {}
                name = function.get("name") or ""
                if name != slot[0]:  # llama-cpp-python repeats the whole name every chunk
                    slot[0] += name
                slot[1] += function.get("arguments") or ""
                carried = True
            if carried:
                self.output_chunks += 1
                self.first_at = self.first_at if self.first_at is not None else now
                self.times.append(now)
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]

    def answer(self) -> Answer:
        return Answer(content="".join(self.content),
                      tool_calls=tuple((n, a) for _, (n, a) in sorted(self.calls.items())),
                      finish_reason=self.finish, error=self.error)


async def timed_request(client: httpx.AsyncClient, body: dict[str, Any]) -> Timed:
    """POST /v1/chat/completions with `body` (streamed) and time it; never raises for what
    the server answers (an HTTP error or a broken stream is the answer's `error`)."""
    stream = ChatStream()
    start = time.perf_counter()
    try:
        async with client.stream("POST", "/v1/chat/completions", json=body) as resp:
            if resp.status_code >= 300:
                text = (await resp.aread()).decode(errors="replace")
                return Timed(Answer(error=f"HTTP {resp.status_code}: {text[:300]}"))
            await read_events(resp, stream)
    except httpx.HTTPError as exc:
        return Timed(Answer(error=f"{type(exc).__name__}: {exc}"))
    e2e = time.perf_counter() - start
    if not stream.done and stream.error is None:
        stream.error = "the stream ended without data: [DONE]"
    elif stream.finish is None and stream.error is None:  # llama.cpp's interrupted requests
        stream.error = "the stream ended without a finish_reason"
    answer = stream.answer()
    usage = stream.usage or {}
    completion = usage.get("completion_tokens")
    return Timed(answer, ttft_s=None if stream.first_at is None else stream.first_at - start,
                 e2e_s=e2e, prompt_tokens=usage.get("prompt_tokens"),
                 completion_tokens=completion if completion is not None
                 else stream.output_chunks,
                 tokens_from="usage" if completion is not None else "chunks")


async def read_events(resp: httpx.Response, stream: Any) -> None:
    """Feed the SSE `data:` events into `stream` (its `add(event, now)`) until the stream
    ends; `data: [DONE]` (chat's end) sets `stream.done`, other APIs' streams set it on
    their own last event."""
    async for line in resp.aiter_lines():
        if not line.startswith("data:"):
            continue
        data = line.removeprefix("data:").strip()
        if data == "[DONE]":
            stream.done = True
            return
        try:
            event = json.loads(data)
        except ValueError:
            continue
        if isinstance(event, dict):
            stream.add(event, time.perf_counter())


async def engine_counters(client: httpx.AsyncClient) -> dict[str, Any]:
    """The engine counters a StrictCall server's /health reports; {} for other servers."""
    try:
        resp = await client.get("/health")
        engine = resp.json().get("engine", {}) if resp.status_code == 200 else {}
    except (httpx.HTTPError, ValueError, AttributeError):
        return {}
    return {k: v for k, v in engine.items() if isinstance(v, int | float)} \
        if isinstance(engine, dict) else {}


def counter_delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    return {k: v - before.get(k, 0) for k, v in after.items()
            if k not in ("running", "queued", "draft_cost_pct")}  # gauges, not counters
