"""The prompt's messages: the conversation as the model's format renders it, with the
rendering's instructions joined to the system turn."""

from __future__ import annotations

from typing import Any


def with_instructions(messages: list[dict[str, Any]],
                      instructions: str | None) -> list[dict[str, Any]]:
    """`messages` with `instructions` joined to the system turn (one made if none)."""
    if not instructions:
        return messages
    if messages and messages[0]["role"] == "system":
        first = {**messages[0], "content": f"{messages[0]['content']}\n\n{instructions}"}
        return [first, *messages[1:]]
    return [{"role": "system", "content": instructions}, *messages]
