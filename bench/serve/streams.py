"""The Responses and Messages APIs' event streams, read into what chat's stream gives
(bench/speed/latency_client.py's ChatStream): the answer in chat's words, the usage as
`prompt_tokens`/`completion_tokens`, and `times`, when each event that carried output
(text, reasoning or a call's arguments) arrived."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from bench.serve.validity import Answer

# Anthropic's stop_reason -> chat's finish_reason.
_STOPS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
          "tool_use": "tool_calls", "pause_turn": "stop", "refusal": "content_filter"}


@dataclass
class _Stream:
    content: list[str] = field(default_factory=list)
    calls: dict[int, list[str]] = field(default_factory=dict)  # index -> [name, arguments]
    finish: str | None = None
    usage: dict[str, int | None] | None = None  # chat's keys (None: a count not sent)
    error: str | None = None
    times: list[float] = field(default_factory=list)
    done: bool = False  # the stream's last event came

    def carried(self, now: float) -> None:
        self.times.append(now)

    def answer(self) -> Answer:
        return Answer(content="".join(self.content),
                      tool_calls=tuple((n, a) for _, (n, a) in sorted(self.calls.items())),
                      finish_reason=self.finish, error=self.error)


class ResponsesStream(_Stream):
    """POST /v1/responses with "stream": true."""

    def add(self, event: dict[str, Any], now: float) -> None:
        kind = event.get("type")
        if kind == "response.output_item.added":
            item = event.get("item") or {}
            if item.get("type") == "function_call":
                self.calls[int(event.get("output_index", 0))] = [
                    item.get("name") or "", item.get("arguments") or ""]
        elif kind == "response.output_text.delta":
            self.content.append(event.get("delta") or "")
            self.carried(now)
        elif kind == "response.function_call_arguments.delta":
            slot = self.calls.setdefault(int(event.get("output_index", 0)), ["", ""])
            slot[1] += event.get("delta") or ""
            self.carried(now)
        elif kind == "response.function_call_arguments.done":
            slot = self.calls.setdefault(int(event.get("output_index", 0)), ["", ""])
            slot[1] = event.get("arguments", slot[1])
        elif kind in ("response.reasoning_text.delta", "response.reasoning_summary_text.delta"):
            self.carried(now)
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            self._end(event.get("response") or {})
        elif kind == "error":
            self.error = f"stream error event: {json.dumps(event)[:300]}"
            self.done = True

    def _end(self, response: dict[str, Any]) -> None:
        self.done = True
        usage = response.get("usage") or {}
        if "output_tokens" in usage:
            self.usage = {"prompt_tokens": usage.get("input_tokens"),
                          "completion_tokens": usage["output_tokens"]}
        status = response.get("status")
        if status == "completed":
            self.finish = "tool_calls" if self.calls else "stop"
        elif status == "incomplete":
            reason = (response.get("incomplete_details") or {}).get("reason")
            self.finish = "length" if reason in (None, "max_output_tokens") else str(reason)
        else:
            self.error = f"response {status}: {json.dumps(response.get('error'))[:300]}"


class MessagesStream(_Stream):
    """POST /v1/messages with "stream": true."""

    def add(self, event: dict[str, Any], now: float) -> None:
        kind = event.get("type")
        if kind == "message_start":
            usage = (event.get("message") or {}).get("usage") or {}
            self.usage = {"prompt_tokens": usage.get("input_tokens")}
        elif kind == "content_block_start":
            block = event.get("content_block") or {}
            if block.get("type") == "tool_use":
                given = block.get("input")
                self.calls[int(event.get("index", 0))] = [
                    block.get("name") or "", json.dumps(given) if given else ""]
        elif kind == "content_block_delta":
            self._delta(int(event.get("index", 0)), event.get("delta") or {}, now)
        elif kind == "message_delta":
            stop = (event.get("delta") or {}).get("stop_reason")
            self.finish = _STOPS.get(stop, stop) if stop else self.finish
            usage = event.get("usage") or {}
            if "output_tokens" in usage:
                self.usage = {**(self.usage or {}), "completion_tokens": usage["output_tokens"]}
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            self.error = f"stream error event: {json.dumps(event)[:300]}"
            self.done = True

    def _delta(self, index: int, delta: dict[str, Any], now: float) -> None:
        if delta.get("type") == "text_delta":
            self.content.append(delta.get("text") or "")
        elif delta.get("type") == "input_json_delta":
            slot = self.calls.setdefault(index, ["", ""])
            slot[1] += delta.get("partial_json") or ""
        elif delta.get("type") != "thinking_delta":
            return
        self.carried(now)
