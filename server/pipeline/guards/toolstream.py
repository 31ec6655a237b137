"""Incremental reading of a JSON array of calls, `[{"name": ..., "arguments": {...}}, ...]`,
as it is decoded: says when a call's name is complete and hands out its argument text in
fragments, for streaming `delta.tool_calls`. The grammar guarantees the shape (name before
arguments); whitespace between tokens is tolerated."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CallNamed:
    index: int
    name: str


@dataclass(frozen=True)
class ArgumentsFragment:
    index: int
    text: str


class CallScanner:
    def __init__(self) -> None:
        self._depth = 0
        self._in_string = self._escape = False
        self._index = -1
        self._key: str | None = None
        self._after_colon = False
        self._capture: list[str] | None = None  # the key or name string being read
        self._capturing = ""                    # "key" | "name"
        self._args_active = False
        self._done = False

    @property
    def done(self) -> bool:
        """The array closed: nothing after it (a closing tag) belongs to the calls."""
        return self._done

    def feed(self, text: str) -> list[CallNamed | ArgumentsFragment]:
        events: list[CallNamed | ArgumentsFragment] = []
        args: list[str] = []
        for ch in text:
            if self._done:
                break
            if self._args_active:
                args.append(ch)
            if self._in_string:
                self._string_char(ch, events)
            else:
                self._structural_char(ch, args)
            if not self._args_active and args:
                events.append(ArgumentsFragment(self._index, "".join(args)))
                args = []
        if args:
            events.append(ArgumentsFragment(self._index, "".join(args)))
        return events

    def _string_char(self, ch: str, events: list[CallNamed | ArgumentsFragment]) -> None:
        if self._escape:
            self._escape = False
        elif ch == "\\":
            self._escape = True
        elif ch == '"':
            self._in_string = False
            if self._capture is not None:
                value, kind = "".join(self._capture), self._capturing
                self._capture = None
                if kind == "key":
                    self._key = value
                elif kind == "name":
                    events.append(CallNamed(self._index, value))
                return
        if self._capture is not None:
            self._capture.append(ch)

    def _structural_char(self, ch: str, args: list[str]) -> None:
        at_element = self._depth == 2 and not self._args_active
        if ch == '"':
            self._in_string = True
            if at_element and not self._after_colon:
                self._capture, self._capturing = [], "key"
            elif at_element and self._key == "name":
                self._capture, self._capturing = [], "name"
            elif at_element and self._key == "arguments":
                self._start_args('"', args)
        elif ch in "{[":
            if at_element and self._after_colon and self._key == "arguments":
                self._start_args(ch, args)
            self._depth += 1
            if self._depth == 2 and ch == "{":
                self._index += 1
                self._key, self._after_colon = None, False
        elif ch in "}]":
            self._depth -= 1
            if self._args_active and self._depth == 2:
                self._args_active = False  # the closing bracket was the arguments' last char
            if self._depth == 0:
                self._done = True
        elif ch == ":" and at_element:
            self._after_colon = True
        elif ch == "," and self._depth == 2:
            if self._args_active:  # a scalar argument value ended
                self._args_active = False
                args.pop()
            self._key, self._after_colon = None, False
        elif not ch.isspace() and at_element and self._after_colon and self._key == "arguments":
            self._start_args(ch, args)

    def _start_args(self, ch: str, args: list[str]) -> None:
        self._args_active = True
        args.append(ch)
