"""Grammar-layer errors. Each says what is wrong, where (a JSON Pointer) and what to do."""

from __future__ import annotations


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
