"""Reading a family's output: reasoning, content and calls, from a partial or complete
decode, in the family's own syntax (`FamilySyntax`). The calls come out as the pipeline's
one representation, a JSON array text `[{"name": ..., "arguments": ...}, ...` that only grows
as the decode goes on (so the streaming scanner reads it as it reads the SmolLM2 list)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from server.formats.reading import Mode, Reading, ReasoningMarks, partial_suffix, split_reasoning
from server.formats.syntax import CallSyntax, FamilySyntax

_DECODER = json.JSONDecoder()
_QWEN_PARAMETER = re.compile(r"<parameter=([^>\n]+)>\n?(.*?)\n?</parameter>", re.S)


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
        content, calls, _ = self._calls(answer, complete=complete)
        if self.mode == "tools":
            content = None
        return Reading(content, calls, reasoning=reasoning, answer_from=start)

    def cut_after(self, text: str, kept: int) -> str:
        _, start, _ = self._reasoning(text)
        _, _, ends = self._calls(text[start:], complete=False)
        return text[:start + ends[kept - 1]]

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
        first = self._first_begin(answer)
        head = answer if first is None else answer[:first[0]]
        cut = max((partial_suffix(head, b) for b in self._begins()), default=0)
        return self._text_content(head[: len(head) - cut]).rstrip()

    # -- reasoning ----------------------------------------------------------------------
    def _reasoning(self, text: str) -> tuple[str | None, int, bool]:
        s = self.syntax
        if not self.thinks or s.think_end is None:
            return None, 0, False
        begin = s.think_begin or ""
        body = len(begin) if begin and text.startswith(begin) else 0
        reasoning, start, thinking = split_reasoning(ReasoningMarks(s.think_end, s.think_then),
                                                     text[body:])
        return reasoning, body + start, thinking

    # -- calls --------------------------------------------------------------------------
    def _begins(self) -> list[str]:
        return [c.begin for c in self.syntax.calls] + [b for b, _ in self.syntax.text_blocks] \
            + [n for n in self.syntax.noise]

    def _first_begin(self, text: str, start: int = 0) -> tuple[int, CallSyntax] | None:
        best: tuple[int, CallSyntax] | None = None
        for call in self.syntax.calls:
            at = text.find(call.begin, start)
            if at >= 0 and (best is None or at < best[0]
                            or (at == best[0] and len(call.begin) > len(best[1].begin))):
                best = (at, call)
        return best

    def _calls(self, text: str, *,
               complete: bool) -> tuple[str | None, str | None, list[int]]:
        """(content, the calls' JSON text, where each complete call ends)."""
        first = self._first_begin(text)
        if first is None:
            return self._text_content(text).strip() if complete else text, None, []
        content = self._text_content(text[:first[0]]).strip() or None
        parts: list[str] = []
        ends: list[int] = []
        found: tuple[int, CallSyntax] | None = first
        while found is not None:
            at, call = found
            args_from = at + len(call.begin)
            part, end = _arguments(call, text, args_from)
            parts.append(f'{{"name": {json.dumps(call.tool)}, "arguments": {part}')
            if end is None:  # the call is still being written
                return content, "[" + ", ".join(parts), ends
            parts[-1] += "}"
            ends.append(end)
            found = self._first_begin(text, end)
        return content, "[" + ", ".join(parts) + ("]" if complete else ""), ends

    def _text_content(self, text: str) -> str:
        """Free text with the format's markers taken out (harmony's final channel kept)."""
        for begin, ends in self.syntax.text_blocks:
            text = text.replace(begin, "")
            for end in ends:
                text = text.replace(end, "")
        for noise in self.syntax.noise:
            text = text.replace(noise, "")
        return text


def _arguments(call: CallSyntax, text: str, start: int) -> tuple[str, int | None]:
    """(the arguments as JSON text so far, where the call's end marker ends or None)."""
    rest = text[start:]
    if call.style == "json":
        try:
            _, length = _DECODER.raw_decode(rest)
        except json.JSONDecodeError:
            return rest, None  # not complete yet: the raw text is a prefix of the final JSON
        end = rest.find(call.end, length)
        return rest[:length], None if end < 0 else start + end + len(call.end)
    end = rest.find(call.end)
    if end < 0:
        return "", None  # written all at once, when the call completes
    # qwen_xml: <parameter=NAME>\nVALUE\n</parameter>; strings raw, other values JSON.
    properties = call.schema.get("properties", {})
    values: dict[str, Any] = {}
    for name, raw in _QWEN_PARAMETER.findall(rest[:end]):
        values[name] = raw if properties.get(name, {}).get("type") == "string" \
            else _json_or_text(raw)
    return json.dumps(values, ensure_ascii=False), start + end + len(call.end)


def write_call(call: CallSyntax, arguments: Any) -> str:
    """One call in the family's syntax, as its grammar writes it."""
    if call.style == "json" or not isinstance(arguments, dict):
        return f"{call.begin}{json.dumps(arguments, ensure_ascii=False)}{call.end}"
    params = "".join(  # qwen_xml: strings raw, other values as JSON
        f"<parameter={name}>\n{value if isinstance(value, str) else json.dumps(value)}\n"
        "</parameter>\n" for name, value in arguments.items())
    return f"{call.begin}{params.rstrip()}{call.end}"


def _json_or_text(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw
