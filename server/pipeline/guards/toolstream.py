"""Incremental reading of a JSON array of calls, `[{"name": ..., "arguments": {...}}, ...]`,
as it is decoded: says when a call's name is complete and hands out its argument text in
fragments, for streaming `delta.tool_calls`. The grammar guarantees the shape (name before
arguments); whitespace between tokens is tolerated."""

from __future__ import annotations

from dataclasses import dataclass

from server.engines.json_text import JsonLexer, Kind


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
        self._lexer = JsonLexer()
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
        lexer = self._lexer
        for ch in text:
            if self._done:
                break
            if self._args_active:
                args.append(ch)
            # Whether the character stands among a call's own keys (before it is read).
            at_element = lexer.depth == 2 and not self._args_active
            kind = lexer.kind(ch)
            if kind in ("char", "escape"):
                if self._capture is not None:
                    self._capture.append(ch)
            elif kind == "unquote":
                self._captured(events)
            else:
                self._structural(kind, ch, at_element, args)
            if not self._args_active and args:
                events.append(ArgumentsFragment(self._index, "".join(args)))
                args = []
        if args:
            events.append(ArgumentsFragment(self._index, "".join(args)))
        return events

    def _captured(self, events: list[CallNamed | ArgumentsFragment]) -> None:
        if self._capture is None:
            return
        value, kind = "".join(self._capture), self._capturing
        self._capture = None
        if kind == "key":
            self._key = value
        elif kind == "name":
            events.append(CallNamed(self._index, value))

    def _structural(self, kind: Kind, ch: str, at_element: bool, args: list[str]) -> None:
        depth = self._lexer.depth  # after the character
        if kind == "quote":
            if at_element and not self._after_colon:
                self._capture, self._capturing = [], "key"
            elif at_element and self._key == "name":
                self._capture, self._capturing = [], "name"
            elif at_element and self._key == "arguments":
                self._start_args('"', args)
        elif kind == "open":
            if at_element and self._after_colon and self._key == "arguments":
                self._start_args(ch, args)
            if depth == 2 and ch == "{":
                self._index += 1
                self._key, self._after_colon = None, False
        elif kind == "close":
            if self._args_active and depth == 2:
                self._args_active = False  # the closing bracket was the arguments' last char
            if depth == 0:
                self._done = True
        elif kind == "colon" and at_element:
            self._after_colon = True
        elif kind == "comma" and depth == 2:
            if self._args_active:  # a scalar argument value ended
                self._args_active = False
                args.pop()
            self._key, self._after_colon = None, False
        elif kind == "scalar" and at_element and self._after_colon \
                and self._key == "arguments":
            self._start_args(ch, args)

    def _start_args(self, ch: str, args: list[str]) -> None:
        self._args_active = True
        args.append(ch)
