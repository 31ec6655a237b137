"""Runaway guards: a constrained decode that would run to max_tokens is stopped early.

Two patterns account for most cut-off calls from small models (and in other servers too):
- the same call again and again (`[{call},{call},{call},...`): once a call completes and is
  identical to an earlier one (same name, same arguments), the list is closed before it and
  the duplicate dropped. While a call could still become a duplicate (its text so far begins
  an earlier call's text), its tokens are held back from the stream, so a client never sees
  a call that is then dropped. In an agent loop "earlier" includes the calls already
  answered since the user's last message (`answered`): a call whose result is in is not
  written again (the answer follows instead; `dedupe_calls` off allows polling).
- a value that loops (`&query_params=&query_params=...`, `0000...`): a unit of tokens
  repeated back to back inside a string or a number, or a unit that nests ever deeper
  (`{"type":{"type":...`). With "steer" (engines that choose tokens themselves), the token
  that would complete such a repeat is avoided while the value is still open, as
  `no_repeat_ngram_size` does but only there; with "stop", or when steering could not help,
  the decode stops with finish_reason="length" and a note. A value is never closed on the
  model's behalf.
- loops with no identical stretch (items with drifting tails, a key nesting itself, the
  same number again and again): steered by item_loops.py, through `steer` too.
- text after the calls ("auto", a family whose calls sit in free text): once calls are
  complete and `AFTER_CALLS_CHARS` of text follow with no other call begun, the answer
  ends after the calls. What a model writes there, before any tool has run, is its guess
  at the results (Qwen2.5-Coder-0.5B wrote `<tool_output>` blocks to max_tokens after a
  complete `ls` call, and the call was lost with the cut-off).

The guard watches tokens on the engine's thread; `decode` (decode.py) stops the engine when
it trips. It works the same on every engine.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from server.engines.detokenize import IncrementalDetokenizer
from server.engines.json_text import JsonLexer
from server.formats.reading import Reader, Reading
from server.pipeline.guards.item_loops import JsonShape, Vocabulary, item_steering
from server.pipeline.request_options import GuardOptions

# A value loops when a unit of 1..MAX_PERIOD tokens repeats back to back so often that the
# repeats cover at least LOOP_TOKENS tokens (and at least MIN_REPEATS times). Chosen from
# the gold argument values of BFCL (bench/accuracy/runaway.py --thresholds prints the measurement):
# the longest back-to-back repeat there is far below these.
MAX_PERIOD = 16
LOOP_TOKENS = 24
MIN_REPEATS = 4
# Steering that keeps having to step in (the model drifts from one near-loop to the next:
# "deer_population.deer_species.deer_species...") stops the decode after this many steps.
STEER_LIMIT = 8
# The most tokens `repeated_unit` needs to find a loop: its longest period times the repeats
# that period needs (steering reads only this tail, not the whole output, at every step).
_LOOP_WINDOW = max(p * max(MIN_REPEATS, -(-LOOP_TOKENS // p)) for p in range(1, MAX_PERIOD + 1))
# Text after complete calls, past this many characters (whitespace aside) with no call
# begun, ends the answer after the calls: room for a separator or a call's opener.
AFTER_CALLS_CHARS = 32
# Characters that end a value or belong to JSON's structure: a unit holding one is not
# inside one value.
_STRUCTURE = frozenset('"{}[],:')
# A call's name at the start of its JSON text, as every reader writes it first.
_NAME = re.compile(r'\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,')


@dataclass(frozen=True)
class Trip:
    """Why a guard stopped a decode, and the text that stands as its output."""

    kind: Literal["duplicate_call", "after_calls", "loop"]
    text: str
    note: dict[str, Any]


class RunawayGuard:
    def __init__(self, reader: Reader, decode: Callable[[Sequence[int]], str], *,
                 options: GuardOptions,
                 vocabulary: Callable[[], Vocabulary] | None = None,
                 evidence: str = "", answered: Sequence[Any] = (),
                 identifying: Mapping[str, Sequence[tuple[str, ...]]] | None = None) -> None:
        """`reader`: how the decode reads, in the model's format; `vocabulary`: the
        tokens' texts, for steering away from loops of items and keys (item_loops.py);
        `evidence`: the prompt's text (items copied from it are not loops); `answered`:
        calls ({"name", "arguments"}) already answered, which are not written again;
        `identifying`: per tool, the argument paths whose values the user gives (its
        grounded fields): a call of that tool with the same values there as an earlier one
        in the answer repeats it, whatever else it changes."""
        self._answered = list(answered)
        self._identifying = identifying or {}
        self._vocabulary = vocabulary
        self._shape = JsonShape(evidence)
        self.reader = reader
        self.mode = reader.mode
        self.options = options
        self._detok = IncrementalDetokenizer(decode)
        self._decode = decode
        self._ids: list[int] = []
        self._held: list[int] = []   # tokens not yet forwarded (a call that may repeat)
        self._calls = _CallSplitter()
        self._fed = 0                # how much of the calls' text the splitter has read
        self._lock = threading.Lock()
        self._steered = 0            # decode steps at which steering had to avoid a token
        self.trip: Trip | None = None
        self._reading: tuple[int, Reading] | None = None  # (its text's length, reading)

    def see(self, token: int) -> list[int]:
        """Take one decoded token; return the tokens that may be shown now."""
        with self._lock:
            if self.trip is not None:
                return []
            self._ids.append(token)
            self._held.append(token)
            text = self._detok.add([token])
            if self.options.loop_guard != "off" and self._looping(text):
                return []
            if self._steered >= STEER_LIMIT:
                self.trip = Trip("loop", text, {"loop_cut": {
                    "kind": "steered", "steps": self._steered}})
                return []
            if self.options.dedupe_calls and self._duplicate(text):
                return []
            if self.mode == "auto" and self._after_calls(text):
                return []
            if self.options.dedupe_calls and (
                    self._calls.pending or self._calls.may_be(self._answered)
                    or self._calls.may_be(self._repeatable())):
                return []  # the call so far may be an earlier one again: wait
            out, self._held = self._held, []
            return out

    def release(self) -> list[int]:
        """The tokens still held once the decode has ended without a trip."""
        with self._lock:
            out, self._held = self._held, []
            return out

    # -- text after the calls ----------------------------------------------------------
    def _read(self, text: str) -> Reading:
        """The text so far, read once per token (the guards that read it share it)."""
        if self._reading is None or self._reading[0] != len(text):
            self._reading = (len(text), self.reader.read(text, complete=False))
        return self._reading[1]

    def _after_calls(self, text: str) -> bool:
        reading = self._read(text)
        after = reading.after_calls
        if after is None or len("".join(after.split())) < AFTER_CALLS_CHARS:
            return False
        kept = len(json.loads(reading.calls + "]")) if reading.calls else 0
        self.trip = Trip("after_calls", self.reader.cut_after(text, kept),
                         {"text_after_calls_dropped": len(after.strip()),
                          "calls_kept": kept})
        return True

    # -- duplicate calls ---------------------------------------------------------------
    def _duplicate(self, text: str) -> bool:
        reading = self._read(text)
        if reading.calls is None:
            return False
        new, self._fed = reading.calls[self._fed:], len(reading.calls)
        for ended in self._calls.feed(new):
            if any(self._repeats(ended.value, earlier) for earlier in self._calls.values[:-1]) \
                    or ended.value in self._answered:
                closed = self.reader.cut_after(text, len(self._calls.values) - 1)
                self.trip = Trip("duplicate_call", closed,
                                 {"duplicate_calls_dropped": 1,
                                  "calls_kept": len(self._calls.values) - 1})
                return True
        return False

    def _repeatable(self) -> list[Any]:
        """The calls of this answer so far whose tool has identifying paths: a later call
        of that tool may repeat one, so its tokens wait until it is whole."""
        return [c for c in self._calls.values
                if isinstance(c, dict) and str(c.get("name")) in self._identifying]

    def _repeats(self, call: Any, earlier: Any) -> bool:
        """`call` is `earlier` again: identical, or the same tool with the same values at
        its identifying paths (where the user gives them, else its required fields). A
        small model allowed several calls lists one request over and over with another
        reason or unit each time (Qwen2.5-0.5B: the same dispute as "duplicate", "fraud",
        "not_received", a triangle's area in meters, feet, yards, to max_tokens); one
        request is one call."""
        if call == earlier:
            return True
        if not (isinstance(call, dict) and isinstance(earlier, dict)) \
                or call.get("name") != earlier.get("name"):
            return False
        paths = self._identifying.get(str(call.get("name"))) or ()
        return bool(paths) and all(_at(call.get("arguments"), p)
                                   == _at(earlier.get("arguments"), p) for p in paths)

    # -- loops inside values -----------------------------------------------------------
    def steer(self, ids: Sequence[int]) -> set[int]:
        """Tokens that would complete a loop if chosen next (for `GenerationRequest.steer`)."""
        with self._lock:
            reading = None if self.trip is not None else self._constrained(self._detok.text)
            if reading is None:
                return set()
            banned = set()
            tail = list(ids[-(_LOOP_WINDOW - 1):])  # all a loop's finding reads (below)
            for period in range(1, min(MAX_PERIOD, len(ids)) + 1):
                candidate = ids[-period]
                if candidate in banned:
                    continue
                found = repeated_unit([*tail, candidate])
                if found is not None and self._loop_kind(found[0], [*ids, candidate]):
                    banned.add(candidate)
            self._steered += bool(banned)
            return banned | self._item_steering(reading)

    def _item_steering(self, reading: Reading) -> set[int]:
        """Tokens that would start another looping item or nest a key again (not counted
        against STEER_LIMIT: avoiding them ends the array or object, it cannot go on)."""
        if self._vocabulary is None:
            return set()
        json_text = reading.calls if reading.calls is not None else reading.content
        if json_text is None:
            return set()
        self._shape.update(json_text)
        return item_steering(self._shape, self._vocabulary)

    def _constrained(self, text: str) -> Reading | None:
        """The text's reading where the decode is inside constrained output, else None
        (free text never loops here)."""
        if self.mode == "text":
            return None
        reading = self._read(text)
        if reading.thinking:
            return None  # the reasoning is free text; its budget bounds it
        return reading if self.mode != "auto" or reading.calls is not None else None

    def _loop_kind(self, period: int, ids: Sequence[int]) -> str | None:
        """"value" (a repeat inside one string or number), "nesting" (a unit that opens
        more than it closes), "items" (the same string item of an array again and again),
        or None (other structure, such as number items)."""
        unit = self._decode(list(ids[-period:]))
        if not _STRUCTURE & set(unit):
            return "value"
        opened = sum(unit.count(c) for c in "{[") - sum(unit.count(c) for c in "}]")
        if opened > 0:
            return "nesting"
        return "items" if _same_string_items(unit) else None

    def _looping(self, text: str) -> bool:
        if not self._constrained(text):
            return False
        found = repeated_unit(self._ids)
        if found is None:
            return False
        period, repeats = found
        kind = self._loop_kind(period, self._ids)
        if kind is None:
            return False
        self.trip = Trip("loop", text, {"loop_cut": {
            "kind": kind, "unit": self._decode(self._ids[-period:]), "repeats": repeats,
            "tokens": period * repeats}})
        return True


def _at(value: Any, path: tuple[str, ...]) -> Any:
    """The value at `path` (object keys; `*`, every item of an array) in `value`."""
    for i, key in enumerate(path):
        if key == "*" and isinstance(value, list):
            return [_at(item, path[i + 1:]) for item in value]
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _same_string_items(unit: str) -> bool:
    """Whether a repeated `unit` is one string item of an array again and again
    (`"Tenet",` in `["Tenet","Tenet","Tenet",...`): the same string written back to back as
    many times as a loop takes is not a list a caller asked for. Numbers are left alone
    (a vector of zeros is a real value)."""
    item = unit.strip()
    rotations = {item[i:] + item[:i] for i in range(len(item))}
    return any(r.count('"') == 2 and r.startswith('"') and r.endswith('",')
               for r in rotations)


def repeated_unit(ids: Sequence[int]) -> tuple[int, int] | None:
    """(period, repeats) when the end of `ids` is a unit of at most MAX_PERIOD tokens
    repeated back to back enough to count as a loop; else None."""
    for period in range(1, MAX_PERIOD + 1):
        need = max(MIN_REPEATS, -(-LOOP_TOKENS // period))
        if len(ids) < period * need:
            break
        unit = ids[-period:]
        repeats = 1
        while (repeats + 1) * period <= len(ids) and \
                ids[-(repeats + 1) * period: -repeats * period] == unit:
            repeats += 1
        if repeats >= need:
            return period, repeats
    return None


@dataclass(frozen=True)
class _Ended:
    start: int  # offset of the call's `{` in the calls' text
    value: Any


class _CallSplitter:
    """Reads a JSON array of calls as it is written: each element's text when it ends, and
    whether the element being written so far begins an earlier element's text."""

    def __init__(self) -> None:
        self._text = ""
        self._lexer = JsonLexer()
        self._start: int | None = None
        self.texts: list[str] = []
        self.values: list[Any] = []

    @property
    def pending(self) -> bool:
        if self._start is None:
            return False
        part = self._text[self._start:]
        return any(t.startswith(part) for t in self.texts)

    def may_be(self, calls: Sequence[Any]) -> bool:
        """Whether the call being written may still turn out to be one of `calls`: its
        name is not written yet, or is one of theirs (their texts may differ from the
        model's in spacing and key order, so the name decides)."""
        if self._start is None or not calls:
            return False
        named = _NAME.match(self._text, self._start)
        return named is None or named.group(1) in {c.get("name") for c in calls}

    def feed(self, text: str) -> list[_Ended]:
        ended = []
        lexer = self._lexer
        for ch in text:
            at = len(self._text)
            self._text += ch
            kind = lexer.kind(ch)
            if kind == "open" and lexer.depth == 2:
                self._start = at
            elif kind == "close" and lexer.depth == 1 and self._start is not None:
                element = self._text[self._start:]
                self.texts.append(element)
                self.values.append(json.loads(element))
                ended.append(_Ended(self._start, self.values[-1]))
                self._start = None
        return ended
