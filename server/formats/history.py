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


def alternating(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` as a chat template takes them that wants user and assistant turns only,
    in turn (Gemma 3 IT's own raises otherwise): a tool result is a user turn, its text in a
    ```tool_output block (as Google's Gemma 3 function-calling guide passes results back),
    and one role's consecutive messages are one, their texts joined by a blank line."""
    out: list[dict[str, Any]] = []
    for message in messages:
        role, text = message["role"], message.get("content") or ""
        if role == "tool":
            role, text = "user", f"```tool_output\n{text}\n```"
        if out and out[-1]["role"] == role and role != "system":
            out[-1] = {**out[-1], "content": f"{out[-1]['content']}\n\n{text}"}
        else:
            out.append({"role": role, "content": text})
    return out
