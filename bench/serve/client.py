"""One streamed request to a target in its API, timed from the moment it is sent: the time
to the first output (TTFT), the gap before each later output event (inter-token latency),
end to end, the tokens, and what the answer came to. Never raises for what the server
answers: an HTTP status, a broken stream or a timeout is the answer's `error`."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import httpx

from bench.serve.streams import MessagesStream, ResponsesStream
from bench.serve.validity import Answer, Api
from bench.speed.latency_client import ChatStream, read_events

PATHS: dict[Api, str] = {"chat": "/v1/chat/completions", "responses": "/v1/responses",
                         "messages": "/v1/messages"}
_STREAMS = {"chat": ChatStream, "responses": ResponsesStream, "messages": MessagesStream}
# Anthropic's clients send it; StrictCall and vLLM accept it.
_MESSAGES_HEADERS = {"anthropic-version": "2023-06-01"}


@dataclass(frozen=True)
class Measured:
    """A request's clock (seconds) and counts; None where the server did not say."""

    answer: Answer
    status: int | None  # None: no HTTP response (connection error, timeout)
    sent_at: float  # time.perf_counter() when it was sent
    e2e_s: float
    ttft_s: float | None = None
    itl_s: tuple[float, ...] = ()
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    tokens_from: str = "usage"  # or "chunks": one token per output event


async def send(client: httpx.AsyncClient, api: Api, body: dict[str, Any],
               headers: dict[str, str]) -> Measured:
    stream: Any = _STREAMS[api]()
    if api == "messages":
        headers = {**_MESSAGES_HEADERS, **headers}
    start = time.perf_counter()
    status = None
    try:
        async with client.stream("POST", PATHS[api], json=body, headers=headers) as resp:
            status = resp.status_code
            if status >= 300:
                text = (await resp.aread()).decode(errors="replace")
                return Measured(Answer(error=f"HTTP {status}: {text[:300]}"), status, start,
                                time.perf_counter() - start)
            await read_events(resp, stream)
    except httpx.HTTPError as exc:
        return Measured(Answer(error=f"{type(exc).__name__}: {exc}"), status, start,
                        time.perf_counter() - start)
    e2e = time.perf_counter() - start
    if not stream.done and stream.error is None:
        stream.error = "the stream ended before its last event"
    elif stream.finish is None and stream.error is None:
        stream.error = "the stream ended without a finish reason"
    return _measured(stream, status, start, e2e)


def _measured(stream: Any, status: int | None, start: float, e2e: float) -> Measured:
    times = stream.times
    usage = stream.usage or {}
    completion = usage.get("completion_tokens")
    return Measured(stream.answer(), status, start, e2e,
                    ttft_s=times[0] - start if times else None,
                    itl_s=tuple(b - a for a, b in zip(times, times[1:], strict=False)),
                    prompt_tokens=usage.get("prompt_tokens"),
                    completion_tokens=completion if completion is not None else len(times),
                    tokens_from="usage" if completion is not None else "chunks")
