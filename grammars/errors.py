"""Grammar-layer errors. Each says what is wrong, where (a JSON Pointer) and what to do."""

from __future__ import annotations

import re

# How xgrammar's C++ prefixes what it reports: a time, its source file and line, and for a
# failed check the check itself ("[09:38:42] /project/cpp/json_schema_converter.cc:974:
# Check failed: (val <= MAX_INT64_AS_DOUBLE) is false: Integer exceeds maximum limit").
_NATIVE_PREFIX = re.compile(r"^\[[0-9:]+\]\s*|^\S+\.(?:cc|cpp|h|hpp|rs|py):[0-9]+:\s*"
                            r"|^Check failed: .*? is false:\s*")


class GrammarError(Exception):
    """Base class: a schema or grammar request this layer cannot serve."""

    def __init__(self, message: str, *, pointer: str = "", hint: str = "",
                 details: list[dict[str, str]] | None = None) -> None:
        self.message = message
        self.details = details or []  # e.g. every rejected keyword, with its pointer
        self.pointer = pointer
        self.hint = hint
        super().__init__(self.render())

    def render(self) -> str:
        where = f" at {self.pointer!r}" if self.pointer else ""
        fix = f" {self.hint}" if self.hint else ""
        return f"{self.message}{where}.{fix}"


class InvalidSchemaError(GrammarError):
    """The schema is not valid JSON Schema (or not valid in the BFCL dialect)."""


class UnsupportedSchemaError(GrammarError):
    """The schema is valid but uses a keyword the grammar backend cannot enforce."""


def native_reason(text: str) -> str:
    """The reason in a grammar library's message, without its source paths and check text:
    what a client can act on, and nothing about the server's files."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    reason = lines[-1] if lines else "no reason given"
    while (stripped := _NATIVE_PREFIX.sub("", reason, count=1)) != reason:
        reason = stripped
    return reason or "no reason given"
