"""How a decoded text reads: the types every format's reader returns, and the pieces they
share. A reader turns a partial or complete decode into reasoning, content and calls; the
calls come out in one representation whatever the family, a JSON array text
`[{"name": ..., "arguments": {...}}, ...` that only grows as the decode goes on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, assert_never

# What a decode writes: free text, one JSON value, calls only, or text or calls.
Mode = Literal["text", "json", "tools", "auto"]


@dataclass(frozen=True)
class Reading:
    """A decoded text, read for its mode."""

    content: str | None  # the text for the client (None: this mode has none)
    # The calls as a JSON array text, growing as the decode goes on (closed once complete).
    # None: no call began.
    calls: str | None
    reasoning: str | None = None  # the free reasoning before the answer, if any
    thinking: bool = False  # the decode is still inside the reasoning
    answer_from: int = 0  # where the answer (after the reasoning) starts in the text
    # What "auto" wrote after its complete calls, while no other call begins there (None:
    # no call complete, or the format keeps its calls in a list of their own).
    after_calls: str | None = None

    @property
    def no_call(self) -> bool:
        """No call read: none began, or the calls array is empty (`auto` decided to answer
        in text), in any format (each reader gives its calls as one JSON array)."""
        return "".join((self.calls or "[]").split()) == "[]"


class Reader(Protocol):
    """Reads a decoded text for a request's mode in one model format's syntax."""

    @property
    def mode(self) -> Mode: ...

    def read(self, text: str, *, complete: bool) -> Reading: ...

    @property
    def reasoning_end(self) -> str | None:
        """The marker that closes the reasoning (None: this decode has no reasoning)."""
        ...

    def showable(self, text: str, *, stop_holdback: int) -> str:
        """The content of a partial decode that can be streamed now."""
        ...

    def cut_after(self, text: str, kept: int) -> str:
        """`text` ended right after its first `kept` calls, written as a complete output of
        this format: what stands when a runaway guard drops the rest. With kept 0 (the
        first call repeats one already answered), "auto" keeps only the text before the
        call, "tools" an empty call list."""
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


def has_content(mode: Mode) -> bool:
    """Whether the answer in this mode can hold text for the client."""
    match mode:
        case "text" | "json" | "auto":
            return True
        case "tools":
            return False
        case _:
            assert_never(mode)


def partial_suffix(text: str, marker: str) -> int:
    """Length of the longest end of `text` that is a beginning of `marker`."""
    for n in range(min(len(marker) - 1, len(text)), 0, -1):
        if text.endswith(marker[:n]):
            return n
    return 0


def skip_ws(text: str, pos: int) -> int:
    """The first position at or after `pos` that is not JSON whitespace."""
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def ends_at(text: str, pos: int, end: str) -> int | None:
    """Where `end` ends if it follows at `pos`, after whitespace or not (an end marker may
    open with a newline of its own: Qwen's "\n</function>")."""
    for at in range(pos, skip_ws(text, pos) + 1):
        if text.startswith(end, at):
            return at + len(end)
    return None
