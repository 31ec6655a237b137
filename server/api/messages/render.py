"""The pipeline's answer in the Anthropic Messages API's shape: a Message, or the
stream of events Anthropic's SDK accumulates into one (`message_start`, content blocks with
`thinking_delta` / `text_delta` / `input_json_delta`, `message_delta`, `message_stop`;
`error` mid-stream).

The reasoning pass's text is a `thinking` block first. Its signature is empty, as other
non-Anthropic servers send it: nothing here could verify one, and thinking blocks sent back
are dropped (translate.py)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal, assert_never

from server.api.errors import body_of
from server.api.sse import Frame
from server.errors import ServiceError
from server.pipeline import (
    Answer,
    ArgumentsDelta,
    CallDone,
    CallStarted,
    Event,
    Finish,
    Finished,
    Opening,
    ReasoningDelta,
    TextDelta,
)

StopReason = Literal["end_turn", "max_tokens", "stop_sequence", "tool_use"]
Message = dict[str, Any]


def to_message(answer: Answer, *, show_thinking: bool = True) -> Message:
    """`show_thinking` False: the thinking block without its text (display "omitted")."""
    content: list[Message] = []
    if answer.reasoning:
        content.append({"type": "thinking", "signature": "",
                        "thinking": answer.reasoning if show_thinking else ""})
    if answer.content:
        content.append({"type": "text", "text": answer.content})
    for call in answer.calls:
        content.append({"type": "tool_use", "id": tool_use_id(call.id), "name": call.name,
                        "input": json.loads(call.arguments)})
    stop_reason, stop_sequence = stop_of(answer.finish, answer.stop_string)
    message = {"id": message_id(answer.id), "type": "message", "role": "assistant",
               "model": answer.model, "content": content, "stop_reason": stop_reason,
               "stop_sequence": stop_sequence,
               "usage": {"input_tokens": answer.usage.prompt_tokens,
                         "output_tokens": answer.usage.completion_tokens}}
    if answer.extension:
        message["strictcall"] = answer.extension
    return message


def stop_of(finish: Finish, stop_string: str | None) -> tuple[StopReason, str | None]:
    """Anthropic's stop_reason and stop_sequence for an answer's finish."""
    if finish == "tool_calls":
        return "tool_use", None
    if finish == "length":
        return "max_tokens", None
    return ("stop_sequence", stop_string) if stop_string else ("end_turn", None)


def tool_use_id(call_id: str) -> str:
    """The call's id in Anthropic's spelling: the same suffix, so they map both ways."""
    return "toolu_" + call_id.removeprefix("call_")


def message_id(answer_id: str) -> str:
    return f"msg_{answer_id}"


@dataclass
class _Call:
    id: str
    name: str
    block: int | None = None  # its content block, once started
    held: str = ""            # argument text not yet sent (the block has not started)


class MessageEvents:
    """The pipeline's events -> Anthropic events. Blocks run one after another, as
    Anthropic's do: a contract call's arguments only come once validated and repaired, so
    its block (and every call after it) is held back until the answer is finished, then
    sent whole."""

    def __init__(self, opening: Opening, events: AsyncIterator[Event], *, model: str,
                 show_thinking: bool = True) -> None:
        self.events = events
        self.id = message_id(opening.id)
        self.model = model
        self.input_tokens = opening.prompt_tokens
        self.show_thinking = show_thinking
        self.blocks = 0                  # content blocks started
        self.open: int | None = None     # the block started and not yet stopped
        self.text_open = False           # the open block is a text block
        self.thinking_open = False       # the open block is the thinking block
        self.calls: dict[int, _Call] = {}  # by the answer's call index
        self.holding = False             # a call is held back: so is every later one

    done = None

    async def frames(self) -> AsyncIterator[Frame]:
        yield _frame({"type": "message_start", "message": self._start_message()})
        yield _frame({"type": "ping"})
        async for item in self.events:
            for event in self._of(item):
                yield _frame(event)

    def error(self, error: ServiceError, path: str) -> Frame:
        return _frame(body_of(error, path))

    def _of(self, event: Event) -> list[Message]:
        match event:
            case ReasoningDelta(text=text):
                return self._think(text)
            case TextDelta(text=text):
                return self._text(text)
            case CallStarted(index=index, id=id, name=name, held=held):
                return self._started(index, _Call(id, name), held=held)
            case ArgumentsDelta(index=index, text=text):
                return self._arguments(index, text)
            case CallDone():
                return []
            case Finished(answer=answer):
                return self._finish(answer)
            case _:
                assert_never(event)

    def _finish(self, answer: Answer) -> list[Message]:
        stop_reason, stop_sequence = stop_of(answer.finish, answer.stop_string)
        return self._release_held() + self._stop_block() + [
            {"type": "message_delta",
             "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
             "usage": {"input_tokens": answer.usage.prompt_tokens,
                       "output_tokens": answer.usage.completion_tokens}},
            {"type": "message_stop"}]

    def _start_message(self) -> Message:
        return {"id": self.id, "type": "message", "role": "assistant", "model": self.model,
                "content": [], "stop_reason": None, "stop_sequence": None,
                "usage": {"input_tokens": self.input_tokens, "output_tokens": 0}}

    def _text(self, text: str) -> list[Message]:
        events = [] if self.text_open else self._start_block({"type": "text", "text": ""})
        self.text_open = True
        return events + [self._delta({"type": "text_delta", "text": text})]

    def _think(self, text: str) -> list[Message]:
        events: list[Message] = []
        if not self.thinking_open:
            # The chat stream's reasoning comes first and whole, before any answer delta.
            assert self.blocks == 0, "reasoning after the answer began"
            events = self._start_block({"type": "thinking", "thinking": "", "signature": ""})
            self.thinking_open = True
        if self.show_thinking:
            events.append(self._delta({"type": "thinking_delta", "thinking": text}))
        return events

    def _started(self, index: int, call: _Call, *, held: bool) -> list[Message]:
        self.calls[index] = call
        self.holding = self.holding or held
        return [] if self.holding else self._start_call(call)

    def _arguments(self, index: int, fragment: str) -> list[Message]:
        call = self.calls[index]
        if call.block is None:
            call.held += fragment
            return []
        if not fragment:
            return []
        return [self._delta({"type": "input_json_delta", "partial_json": fragment},
                            index=call.block)]

    def _release_held(self) -> list[Message]:
        events: list[Message] = []
        for call in self.calls.values():
            if call.block is None:
                events += self._start_call(call)
                if call.held:
                    events.append(self._delta(
                        {"type": "input_json_delta", "partial_json": call.held},
                        index=call.block))
        return events

    def _start_call(self, call: _Call) -> list[Message]:
        events = self._start_block({"type": "tool_use", "id": tool_use_id(call.id),
                                    "name": call.name, "input": {}})
        call.block, self.text_open = self.open, False
        return events

    def _start_block(self, block: dict[str, Any]) -> list[Message]:
        events = self._stop_block()
        self.open, self.blocks = self.blocks, self.blocks + 1
        return events + [{"type": "content_block_start", "index": self.open,
                          "content_block": block}]

    def _stop_block(self) -> list[Message]:
        if self.open is None:
            return []
        # A thinking block ends with its signature, as Anthropic's do (empty: see above).
        events = [self._delta({"type": "signature_delta", "signature": ""})] \
            if self.thinking_open else []
        index, self.open, self.text_open, self.thinking_open = self.open, None, False, False
        return events + [{"type": "content_block_stop", "index": index}]

    def _delta(self, delta: dict[str, Any], *, index: int | None = None) -> Message:
        return {"type": "content_block_delta",
                "index": self.open if index is None else index, "delta": delta}


def _frame(event: Message) -> Frame:
    return Frame(event, event=event["type"])
