"""The chat pipeline's answer in the Anthropic Messages API's shape: a Message, or the
stream of events Anthropic's SDK accumulates into one (`message_start`, content blocks with
`thinking_delta` / `text_delta` / `input_json_delta`, `message_delta`, `message_stop`;
`error` mid-stream).

The reasoning pass's text is a `thinking` block first. Its signature is empty, as other
non-Anthropic servers send it: nothing here could verify one, and thinking blocks sent back
are dropped (messages.py)."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal

from fastapi import Request

from server.api.errors import body_of
from server.errors import ServiceError
from server.pipeline.stream import ChunkStream
from server.protocol import ChatCompletion

log = logging.getLogger("strictcall.api")
StopReason = Literal["end_turn", "max_tokens", "stop_sequence", "tool_use"]


def to_message(completion: ChatCompletion, *, show_thinking: bool = True) -> dict[str, Any]:
    """`show_thinking` False: the thinking block without its text (display "omitted")."""
    choice = completion.choices[0]
    content: list[dict[str, Any]] = []
    if choice.message.reasoning:
        content.append({"type": "thinking", "signature": "",
                        "thinking": choice.message.reasoning if show_thinking else ""})
    if choice.message.content:
        content.append({"type": "text", "text": choice.message.content})
    for call in choice.message.tool_calls or []:
        content.append({"type": "tool_use", "id": tool_use_id(call.id),
                        "name": call.function.name, "input": json.loads(call.function.arguments)})
    stop_reason, stop_sequence = stop_of(choice.finish_reason, choice.stop_reason)
    message = {"id": message_id(completion.id), "type": "message", "role": "assistant",
               "model": completion.model, "content": content, "stop_reason": stop_reason,
               "stop_sequence": stop_sequence,
               "usage": {"input_tokens": completion.usage.prompt_tokens,
                         "output_tokens": completion.usage.completion_tokens}}
    if completion.strictcall:
        message["strictcall"] = completion.strictcall
    return message


def stop_of(finish_reason: str, stop_string: str | None) -> tuple[StopReason, str | None]:
    """Anthropic's stop_reason and stop_sequence for a chat finish_reason."""
    if finish_reason == "tool_calls":
        return "tool_use", None
    if finish_reason == "length":
        return "max_tokens", None
    return ("stop_sequence", stop_string) if stop_string else ("end_turn", None)


def tool_use_id(call_id: str) -> str:
    """The chat call's id in Anthropic's spelling: the same suffix, so they map both ways."""
    return "toolu_" + call_id.removeprefix("call_")


def message_id(completion_id: str) -> str:
    return "msg_" + completion_id.removeprefix("chatcmpl-")


async def sse(events: MessageEvents, request: Request) -> AsyncIterator[str]:
    """Anthropic's server-sent events: each names its type on an `event:` line."""
    try:
        async for event in events.events():
            yield _event(event)
    except ServiceError as exc:  # after the stream started: an error event ends it
        yield _event(body_of(exc, request.url.path))
    except Exception:  # noqa: BLE001 - never a broken connection without a word
        log.exception("stream failed")
        error = ServiceError("internal error while streaming; the server log has the details")
        yield _event(body_of(error, request.url.path))


def _event(data: dict[str, Any]) -> str:
    return f"event: {data['type']}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


@dataclass
class _Call:
    id: str
    name: str
    block: int | None = None  # its content block, once started
    held: str = ""            # argument text not yet sent (the block has not started)


class MessageEvents:
    """Chat chunks -> Anthropic events. Blocks run one after another, as Anthropic's do: a
    contract call's arguments only come once validated and repaired, so its block (and every
    call after it) is held back until the chunks end, then sent whole."""

    def __init__(self, chunks: ChunkStream, *, input_tokens: int,
                 show_thinking: bool = True) -> None:
        self.chunks = chunks
        self.input_tokens = input_tokens
        self.show_thinking = show_thinking
        self.contracts = set(chunks.prep.plan.contracts)
        self.blocks = 0                  # content blocks started
        self.open: int | None = None     # the block started and not yet stopped
        self.text_open = False           # the open block is a text block
        self.thinking_open = False       # the open block is the thinking block
        self.calls: dict[int, _Call] = {}  # by the chat call's index
        self.holding = False             # a call is held back: so is every later one
        self.finish: tuple[str, str | None] = ("stop", None)
        self.usage: dict[str, int] = {}

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        yield {"type": "message_start", "message": self._start_message()}
        yield {"type": "ping"}
        async for chunk in self.chunks.events():
            for event in self._from_chunk(chunk):
                yield event
        for event in self._release_held() + self._stop_block():
            yield event
        stop_reason, stop_sequence = stop_of(*self.finish)
        yield {"type": "message_delta",
               "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
               "usage": {"input_tokens": self.usage.get("prompt_tokens", self.input_tokens),
                         "output_tokens": self.usage.get("completion_tokens", 0)}}
        yield {"type": "message_stop"}

    def _start_message(self) -> dict[str, Any]:
        return {"id": message_id(self.chunks.id), "type": "message", "role": "assistant",
                "model": self.chunks.pipeline.model_name, "content": [], "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": self.input_tokens, "output_tokens": 0}}

    def _from_chunk(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        self.usage = chunk.get("usage") or self.usage
        events: list[dict[str, Any]] = []
        for choice in chunk["choices"]:
            delta = choice["delta"]
            if delta.get("reasoning_content"):
                events += self._think(delta["reasoning_content"])
            if delta.get("content"):
                events += self._text(delta["content"])
            for call in delta.get("tool_calls") or []:
                events += self._call(call)
            if choice["finish_reason"]:
                self.finish = (choice["finish_reason"], choice.get("stop_reason"))
        return events

    def _text(self, text: str) -> list[dict[str, Any]]:
        events = [] if self.text_open else self._start_block({"type": "text", "text": ""})
        self.text_open = True
        return events + [self._delta({"type": "text_delta", "text": text})]

    def _think(self, text: str) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        if not self.thinking_open:
            # The chat stream's reasoning comes first and whole, before any answer delta.
            assert self.blocks == 0, "reasoning after the answer began"
            events = self._start_block({"type": "thinking", "thinking": "", "signature": ""})
            self.thinking_open = True
        if self.show_thinking:
            events.append(self._delta({"type": "thinking_delta", "thinking": text}))
        return events

    def _call(self, delta: dict[str, Any]) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        if "id" in delta:
            call = self.calls[delta["index"]] = _Call(delta["id"], delta["function"]["name"])
            self.holding = self.holding or call.name in self.contracts
            if not self.holding:
                events += self._start_call(call)
        call, fragment = self.calls[delta["index"]], delta["function"].get("arguments") or ""
        if call.block is None:
            call.held += fragment
        elif fragment:
            events.append(self._delta({"type": "input_json_delta", "partial_json": fragment},
                                      index=call.block))
        return events

    def _release_held(self) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        for call in self.calls.values():
            if call.block is None:
                events += self._start_call(call)
                if call.held:
                    events.append(self._delta(
                        {"type": "input_json_delta", "partial_json": call.held},
                        index=call.block))
        return events

    def _start_call(self, call: _Call) -> list[dict[str, Any]]:
        events = self._start_block({"type": "tool_use", "id": tool_use_id(call.id),
                                    "name": call.name, "input": {}})
        call.block, self.text_open = self.open, False
        return events

    def _start_block(self, block: dict[str, Any]) -> list[dict[str, Any]]:
        events = self._stop_block()
        self.open, self.blocks = self.blocks, self.blocks + 1
        return events + [{"type": "content_block_start", "index": self.open,
                          "content_block": block}]

    def _stop_block(self) -> list[dict[str, Any]]:
        if self.open is None:
            return []
        # A thinking block ends with its signature, as Anthropic's do (empty: see above).
        events = [self._delta({"type": "signature_delta", "signature": ""})] \
            if self.thinking_open else []
        index, self.open, self.text_open, self.thinking_open = self.open, None, False, False
        return events + [{"type": "content_block_stop", "index": index}]

    def _delta(self, delta: dict[str, Any], *, index: int | None = None) -> dict[str, Any]:
        return {"type": "content_block_delta",
                "index": self.open if index is None else index, "delta": delta}
