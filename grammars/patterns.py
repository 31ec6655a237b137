"""Client regular expressions in linear time.

Every pattern a client sends (a JSON Schema `pattern`, a `patternProperties` key) is hostile
input: Python's backtracking `re` takes hours on `^(a+)+$` against forty characters, holding
the interpreter lock, so one request would freeze the whole process. Client patterns run in
RE2 instead (google-re2), whose matching is linear in the text whatever the pattern, and
whose compilation is bounded by `MAX_PROGRAM_BYTES`. What RE2 cannot express (lookarounds,
backreferences, a repetition over 1000) runs in the `regex` module under a hard time budget
(`BUDGET_S` a search, the interpreter lock released meanwhile): past it the search raises
`PatternTimeout`, which the validator reports as a violation naming the pattern and grounding
as no match. A pattern neither compiles is refused when the schema arrives, with the reason.
Python's `re` stays for the project's own patterns.

RE2's classes are ECMA-262's, the dialect JSON Schema names: `\\d` and `\\w` are ASCII, `$`
is the end of the text (not before a final newline)."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import re2
import regex

# RE2's memory for one compiled program: `[a-z]{1000}` fits; a pattern past it is refused.
MAX_PROGRAM_BYTES = 8 << 20
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # (the reason reaches the client in the 400 instead)
_OPTIONS.max_mem = MAX_PROGRAM_BYTES


class Match(Protocol):
    def span(self) -> tuple[int, int]: ...

    def group(self) -> str: ...


class ClientRegex(Protocol):
    """What the server asks of a compiled client pattern (offsets in characters)."""

    def search(self, text: str) -> Match | None: ...

    def finditer(self, text: str) -> Iterator[Match]: ...


# One search of a pattern RE2 cannot run, at most (wall time, in the `regex` module).
BUDGET_S = 0.05


class PatternError(ValueError):
    """A client pattern the server cannot run; the message says why and what to do."""


class PatternTimeout(PatternError):
    """A search of a pattern RE2 cannot run went past `BUDGET_S`."""


@functools.lru_cache(maxsize=2048)
def client_regex(pattern: str) -> ClientRegex:
    """`pattern` compiled in RE2, else under the `regex` module's budget (unanchored search
    semantics, as JSON Schema's `pattern`); remembered, since clients send the same schemas
    with every request."""
    try:
        compiled: ClientRegex = re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        try:
            return Budgeted(pattern, regex.compile(pattern))
        except regex.error as fallback:
            raise PatternError(f"pattern {pattern!r} does not compile "
                               f"({_reason(exc)}; {fallback})") from None
    return compiled


@dataclass(frozen=True)
class Budgeted:
    """A pattern RE2 cannot run (a lookahead, a backreference), searched under `BUDGET_S`:
    the `regex` module stops a backtracking search at its timeout."""

    pattern: str
    compiled: Any

    def search(self, text: str) -> Match | None:
        try:
            found: Match | None = self.compiled.search(text, timeout=BUDGET_S)
        except TimeoutError:
            raise self._timeout() from None
        return found

    def finditer(self, text: str) -> Iterator[Match]:
        try:
            yield from self.compiled.finditer(text, timeout=BUDGET_S)
        except TimeoutError:
            raise self._timeout() from None

    def _timeout(self) -> PatternTimeout:
        return PatternTimeout(f"pattern {self.pattern!r} took longer than {BUDGET_S * 1000:g} "
                              "ms to search (it backtracks); write it without lookarounds or "
                              "backreferences so it runs in RE2, in linear time")


def _reason(exc: Exception) -> str:
    raw = exc.args[0] if exc.args else exc
    return raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)


def matches(pattern: str, text: str) -> bool:
    """JSON Schema's `pattern`: whether `pattern` matches anywhere in `text` (PatternTimeout:
    it could not tell within the budget)."""
    return client_regex(pattern).search(text) is not None
