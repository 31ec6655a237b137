"""The conversation as chat-template messages, in the two ways templates take it: flattened
to role/content pairs, each earlier call written as text in the family's syntax, or
structured, with `tool_calls` and `tool` messages that the template renders itself."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from server.task import EarlierCall, Turn

# The calls of one assistant turn written as text, in a family's syntax.
CallWriter = Callable[[Sequence[EarlierCall]], str]


def flattened(turns: Sequence[Turn], write_calls: CallWriter, *,
              opening: str = "") -> list[dict[str, Any]]:
    """`opening`: what the model writes before the text of an answer that holds calls
    (Kimi K3's response block, which its generation prompt opens), so an earlier turn reads
    as the model writes one."""
    out: list[dict[str, Any]] = []
    for turn in turns:
        text = turn.text
        if turn.calls:
            text = f"{opening}{text}{write_calls(turn.calls)}"
        if turn.role == "tool":
            text = f"[result of call {turn.call_id}] {text}"
        out.append({"role": turn.role, "content": text})
    return out


def structured(turns: Sequence[Turn]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for turn in turns:
        message: dict[str, Any] = {"role": turn.role, "content": turn.text}
        if turn.calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function",
                 "function": {"name": c.name, "arguments": c.arguments}}
                for c in turn.calls]
        if turn.role == "tool":
            message["tool_call_id"] = turn.call_id
        out.append(message)
    return out
