"""What a request asks the decode to write (its mode), and how the decoded text reads in each:
the one dispatch on the mode, shared by the plain and the streaming paths.

- text: free text.
- json: one JSON value (`response_format`).
- tools: the answer is a JSON array of calls (the call block's opening tag is prefilled).
- auto: free text, or text then one call block `<tool_call>[...]</tool_call>`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal, Protocol, assert_never

from server.pipeline.prompt import CALL_CLOSE, CALL_OPEN

Mode = Literal["text", "json", "tools", "auto"]


@dataclass(frozen=True)
class Reading:
    """A decoded text, read for its mode."""

    content: str | None  # the text for the client (None: this mode has none)
    # The calls as a JSON array text, `[{"name": ..., "arguments": {...}}, ...`, growing
    # as the decode goes on (closed once complete). None: no call began.
    calls: str | None
    # Where the calls' text starts in the decoded text (0 when there is none; only
    # meaningful for readers whose `calls_in_text` is true).
    calls_from: int = 0
    reasoning: str | None = None  # the free reasoning before the answer, if any
    thinking: bool = False  # the decode is still inside the reasoning
    answer_from: int = 0  # where the answer (after the reasoning) starts in the text
    # Where each complete call ends in the decoded text (readers that re-assemble calls).
    call_ends: tuple[int, ...] = ()


class Reader(Protocol):
    """Reads a decoded text for a request's mode in one model format's syntax."""

    mode: Mode
    # Whether `Reading.calls` is the decoded text from `calls_from` on (the SmolLM2 list),
    # so a guard may cut the text there; False for formats whose calls are re-assembled.
    calls_in_text: bool

    def read(self, text: str, *, complete: bool) -> Reading: ...

    @property
    def reasoning_end(self) -> str | None:
        """The marker that closes the reasoning (None: this decode has no reasoning)."""
        ...

    def showable(self, text: str, *, stop_holdback: int) -> str:
        """The content of a partial decode that can be streamed now."""
        ...


@dataclass(frozen=True)
class ReasoningMarks:
    """The free reasoning block that opens a decode: it ends at `end`; `then` is what the
    grammar writes after it, before the answer."""

    end: str
    then: str = ""


def split_reasoning(marks: ReasoningMarks | None, text: str) -> tuple[str | None, int, bool]:
    """(the reasoning, where the answer starts, still thinking) for a decoded text."""
    if marks is None:
        return None, 0, False
    at = text.find(marks.end)
    if at < 0:
        return text[: len(text) - partial_suffix(text, marks.end)].strip(), len(text), True
    after = at + len(marks.end)
    if text.startswith(marks.then, after):
        after += len(marks.then)
    elif marks.then.startswith(text[after:]):
        after = len(text)  # what the grammar writes next is not all there yet
    return text[:at].strip(), after, False


@dataclass(frozen=True)
class ListReader:
    """The SmolLM2 format: calls as one JSON array (after `<tool_call>` in auto), optionally
    after a reasoning block."""

    mode: Mode
    reasoning: ReasoningMarks | None = None
    calls_in_text: bool = True

    def read(self, text: str, *, complete: bool) -> Reading:
        reasoning, start, thinking = split_reasoning(self.reasoning, text)
        if thinking:
            return Reading(None, None, reasoning=reasoning, thinking=True,
                           answer_from=len(text))
        reading = read_output(self.mode, text[start:], complete=complete)
        return replace(reading, calls_from=reading.calls_from + start, reasoning=reasoning,
                       answer_from=start)

    @property
    def reasoning_end(self) -> str | None:
        return self.reasoning.end if self.reasoning is not None else None

    def showable(self, text: str, *, stop_holdback: int) -> str:
        reasoning, start, thinking = split_reasoning(self.reasoning, text)
        return "" if thinking else showable_content(self.mode, text[start:],
                                                    stop_holdback=stop_holdback)


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
            return text[: len(text) - partial_suffix(text, CALL_OPEN)].rstrip()
        case "tools":
            return ""
        case _:
            assert_never(mode)


def partial_suffix(text: str, marker: str) -> int:
    """Length of the longest end of `text` that is a beginning of `marker`."""
    for n in range(min(len(marker) - 1, len(text)), 0, -1):
        if text.endswith(marker[:n]):
            return n
    return 0
