"""The one lexer a growing JSON text is read with: what each character is (structure, a
string's quote, a string's own character, an escape), with the depth of the containers open
after it. The readers (the runaway guards' call splitter in `pipeline/guards/runaway.py`,
`toolstream.py`'s call scanner, `item_loops.py`'s shape, and `JsonClose` below for the vLLM
engines) keep only what they need on top. Never a validator: the grammar guarantees the
text is JSON."""

from __future__ import annotations

from typing import Literal

from grammars import GrammarSpec, TaggedSpec

# What a character is: a container opens or closes; a string opens (`quote`) or closes
# (`unquote`); a string's character (`char`, an escaped one included) or its backslash
# (`escape`); a `colon`, a `comma`, `space` between values, or part of a number or literal
# (`scalar`).
Kind = Literal["open", "close", "quote", "unquote", "char", "escape", "colon", "comma",
               "space", "scalar"]


class JsonLexer:
    __slots__ = ("depth", "in_string", "_escape")

    def __init__(self) -> None:
        self.depth = 0          # containers open after the last character
        self.in_string = False  # inside a string after the last character
        self._escape = False

    def kind(self, ch: str) -> Kind:
        if self.in_string:
            if self._escape:
                self._escape = False
                return "char"
            if ch == "\\":
                self._escape = True
                return "escape"
            if ch == '"':
                self.in_string = False
                return "unquote"
            return "char"
        if ch == '"':
            self.in_string = True
            return "quote"
        if ch in "{[":
            self.depth += 1
            return "open"
        if ch in "}]":
            self.depth -= 1
            return "close"
        if ch == ":":
            return "colon"
        if ch == ",":
            return "comma"
        if ch.isspace():
            return "space"
        return "scalar"


class JsonClose:
    """Where the JSON value a grammar writes closes, read chunk by chunk: its root object or
    array. vLLM's xgrammar grammar, with no whitespace allowed (`disable_any_whitespace`),
    then allows only EOS: one more model step for the EOS token alone, which the vLLM
    engines do not wait for. A root that is no object or array (a number could still grow)
    is never called closed."""

    def __init__(self) -> None:
        self._lexer = JsonLexer()
        self.closed = self._scalar = False

    @classmethod
    def for_spec(cls, spec: GrammarSpec | None) -> JsonClose | None:
        """One for a spec whose whole output is a JSON value (a schema's answer, calls as a
        JSON array); None without a grammar, or for a tagged one (text or tagged calls,
        after which more than EOS may come)."""
        return cls() if spec is not None and not isinstance(spec, TaggedSpec) else None

    def add(self, text: str) -> bool:
        """Add the next chunk of text; True once the root has closed."""
        if self.closed or self._scalar:
            return self.closed
        for char in text:
            kind = self._lexer.kind(char)
            if kind == "close" and self._lexer.depth == 0:
                self.closed = True
                return True
            if self._lexer.depth == 0 and kind not in ("open", "space"):
                self._scalar = True
                return False
        return False
