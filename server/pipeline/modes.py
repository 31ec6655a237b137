"""What a request asks the decode to write (its mode), and how the decoded text reads in each:
the one dispatch on the mode, shared by the plain and the streaming paths.

- text: free text.
- json: one JSON value (`response_format`).
- tools: the answer is a JSON array of calls (the call block's opening tag is prefilled).
- auto: free text, or text then one call block `<tool_call>[...]</tool_call>`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, assert_never

from server.pipeline.prompt import CALL_CLOSE, CALL_OPEN

Mode = Literal["text", "json", "tools", "auto"]


@dataclass(frozen=True)
class Reading:
    """A decoded text, read for its mode."""

    content: str | None  # the text for the client (None: this mode has none)
    calls: str | None    # the calls' JSON text (None: no call block began)
    # Where the calls' text starts in the decoded text (0 when there is none).
    calls_from: int = 0


def has_content(mode: Mode) -> bool:
    """Whether the answer in this mode can hold text for the client."""
    match mode:
        case "text" | "json" | "auto":
            return True
        case "tools":
            return False
        case _:
            assert_never(mode)


def read_output(mode: Mode, text: str, *, complete: bool) -> Reading:
    """Split `text` (decoded so far, or all of it once `complete`) into content and calls."""
    match mode:
        case "text" | "json":
            return Reading(text, None)
        case "tools":
            return Reading(None, text)
        case "auto":
            start = text.find(CALL_OPEN)
            if start < 0:
                return Reading(text, None)
            begin = start + len(CALL_OPEN)
            block = text[begin:]
            if complete:
                block = block[:block.rfind(CALL_CLOSE)]
            return Reading(text[:start].rstrip() or None, block, begin)
        case _:
            assert_never(mode)


def showable_content(mode: Mode, text: str, *, stop_holdback: int) -> str:
    """The part of a partial decode's content that can be streamed now: what cannot yet turn
    out to be the start of a stop string (text, json) or of a call block (auto)."""
    match mode:
        case "text" | "json":
            return text[: len(text) - stop_holdback] if stop_holdback else text
        case "auto":
            # Trailing whitespace waits too: before a call it is not part of the content.
            return text[: len(text) - _partial_suffix(text, CALL_OPEN)].rstrip()
        case "tools":
            return ""
        case _:
            assert_never(mode)


def _partial_suffix(text: str, marker: str) -> int:
    """Length of the longest end of `text` that is a beginning of `marker`."""
    for n in range(min(len(marker) - 1, len(text)), 0, -1):
        if text.endswith(marker[:n]):
            return n
    return 0
