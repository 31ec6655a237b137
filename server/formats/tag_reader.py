"""Reading a family's output: reasoning, content and calls, from a partial or complete
decode, in the family's own syntax (`FamilySyntax`). The calls come out as the pipeline's
one representation, a JSON array text `[{"name": ..., "arguments": ...}, ...` that only grows
as the decode goes on (so the streaming scanner reads it as it reads the SmolLM2 list). The
arguments are read in the family's own style (server/formats/arguments.py)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from server.formats.arguments import read_arguments, write_arguments
from server.formats.reading import Mode, Reading, ReasoningMarks, partial_suffix, split_reasoning
from server.formats.syntax import CallSyntax, FamilySyntax


@dataclass(frozen=True)
class _Found:
    """A call that begins at `at`: its syntax and where its arguments start; `call` None
    while its header is not all written (or names one of several tools still)."""

    at: int
    call: CallSyntax | None = None
    args_from: int = 0


@dataclass(frozen=True)
class TagReader:
    mode: Mode
    syntax: FamilySyntax
    thinks: bool = False  # the decode opens with the family's reasoning block

    def read(self, text: str, *, complete: bool) -> Reading:
        reasoning, start, thinking = self._reasoning(text)
        if thinking:
            return Reading(None, None, reasoning=reasoning, thinking=True,
                           answer_from=len(text))
        answer = text[start:]
        if self.mode in ("text", "json"):
            return Reading(self._text_content(answer) if self.syntax.text_blocks
                           else answer.strip() if self.mode == "json" else answer, None,
                           reasoning=reasoning, answer_from=start)
        content, calls, ends, settled = self._calls(answer, complete=complete)
        if self.mode == "tools":
            content = None
        after = None
        if self.mode == "auto" and ends and settled:  # past the last call's end, less a
            after = answer[ends[-1]:]  # call's opener being written at the end of it
            after = self._text_content(after[:len(after) - max(
                (partial_suffix(after, b) for b in self._begins()), default=0)])
        return Reading(content, calls, reasoning=reasoning, answer_from=start,
                       after_calls=after)

    def cut_after(self, text: str, kept: int) -> str:
        _, start, _ = self._reasoning(text)
        if kept == 0:  # no call kept: the text before the first call
            first = self._find(text[start:], 0, complete=False)
            return text if first is None else text[:start + first.at]
        _, _, ends, _ = self._calls(text[start:], complete=False)
        return text[:start + ends[kept - 1]] + self.syntax.calls_end + self.syntax.tail

    @property
    def reasoning_end(self) -> str | None:
        return self.syntax.think_end if self.thinks else None

    def showable(self, text: str, *, stop_holdback: int) -> str:
        reasoning, start, thinking = self._reasoning(text)
        if thinking or self.mode == "tools":
            return ""
        answer = text[start:]
        if self.mode in ("text", "json") and not self.syntax.text_blocks:
            return answer[: len(answer) - stop_holdback] if stop_holdback else answer
        first = self._find(answer, 0, complete=False)
        head = answer if first is None else answer[:first.at]
        cut = max((partial_suffix(head, b) for b in self._begins()), default=0)
        return self._text_content(head[: len(head) - cut]).rstrip()

    # -- reasoning ----------------------------------------------------------------------
    def _reasoning(self, text: str) -> tuple[str | None, int, bool]:
        s = self.syntax
        if not self.thinks or s.think_end is None:
            return None, self._after_preamble(text), False
        begin = s.think_begin or ""
        body = len(begin) if begin and text.startswith(begin) else 0
        reasoning, start, thinking = split_reasoning(ReasoningMarks(s.think_end, s.think_then),
                                                     text[body:])
        return reasoning, body + start, thinking

    def _after_preamble(self, text: str) -> int:
        """Where the answer starts when reasoning is off: after what the grammar writes
        first (MiniMax's empty think block), or at the start."""
        pre = self.syntax.preamble
        if pre and text.startswith(pre):
            return len(pre)
        return len(text) if pre and pre.startswith(text) else 0

    # -- calls --------------------------------------------------------------------------
    def _begins(self) -> list[str]:
        return [c.begin for c in self.syntax.read_calls] \
            + [b for b, _ in self.syntax.text_blocks] \
            + [n for n in self.syntax.noise]

    def _find(self, text: str, start: int, *, complete: bool) -> _Found | None:
        """The first call at or after `start`. A header names its tool only when no other
        tool's header could still be the one written (`get` beside `get_weather`)."""
        at = start
        while True:
            hits = [(pos, c) for c in self.syntax.read_calls
                    if (pos := text.find(c.begin, at)) >= 0]
            if not hits:
                return None
            at = min(pos for pos, _ in hits)
            matched: list[tuple[int, CallSyntax]] = []
            pending = False
            for call in self.syntax.read_calls:
                end = _header_end(call, text, at)
                if end == -1:
                    pending = pending or not complete
                elif end is not None:
                    matched.append((end, call))
            if pending:
                return _Found(at)
            if matched:
                end, call = max(matched, key=lambda m: m[0])
                return _Found(at, call, end)
            at += 1  # a begin that no header completes (a tool not offered): not a call

    def _calls(self, text: str, *,
               complete: bool) -> tuple[str | None, str | None, list[int], bool]:
        """(content, the calls' JSON text, where each complete call ends, whether no call
        is being written after those)."""
        found = self._find(text, 0, complete=complete)
        if found is None:
            return self._text_content(text).strip() if complete else text, None, [], True
        content = self._text_content(text[:found.at]).strip() or None
        parts: list[str] = []
        ends: list[int] = []
        while found is not None:
            if found.call is None:  # a header still being written
                return content, "[" + ", ".join(parts), ends, False
            part, end = read_arguments(found.call, text, found.args_from)
            parts.append(f'{{"name": {json.dumps(found.call.tool)}, "arguments": {part}')
            if end is None:  # the call is still being written
                return content, "[" + ", ".join(parts), ends, False
            parts[-1] += "}"
            ends.append(end)
            found = self._find(text, end, complete=complete)
        if complete:
            after = self._text_content(text[ends[-1]:]).strip()
            content = "\n".join(c for c in (content, after) if c) or None
        return content, "[" + ", ".join(parts) + ("]" if complete else ""), ends, True

    def _text_content(self, text: str) -> str:
        """Free text with the format's markers taken out (harmony's final channel kept)."""
        for begin, ends in self.syntax.text_blocks:
            text = text.replace(begin, "")
            for end in ends:
                text = text.replace(end, "")
        for noise in self.syntax.noise:
            text = text.replace(noise, "")
        return text


def _header_end(call: CallSyntax, text: str, at: int) -> int | None:
    """Where `call`'s header, starting at `at`, ends: -1 while the text ends inside it,
    None when the text there is not this call's header."""
    written = text[at:]
    if not written.startswith(call.begin):
        return -1 if call.begin.startswith(written) else None
    pos = at + len(call.begin)
    if call.index is None:
        return pos
    number = re.compile(call.index).match(text, pos)
    if number is None:
        return -1 if pos == len(text) else None
    pos = number.end()
    rest = text[pos:]
    if rest.startswith(call.then):
        return pos + len(call.then)
    return -1 if call.then.startswith(rest) else None


def write_call(call: CallSyntax, arguments: Any, index: int = 0) -> str:
    """One call in the family's syntax, as its chat template writes it (`index`: the
    number families such as Kimi write in the header)."""
    header = call.begin if call.index is None else f"{call.begin}{index}{call.then}"
    return f"{header}{write_arguments(call, arguments)}{call.end}"
