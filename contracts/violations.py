"""Violations are values: where, what rule, what was seen, what is allowed, in words.

Validators raise `Violated` for the rules a schema cannot express; pydantic's own errors are
translated with the allowed values read from the contract's schema, because feedback that
lists the allowed values is what makes a repair succeed."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

ViolationCode = Literal["missing_required", "wrong_type", "out_of_range", "invalid_enum",
                        "pattern_mismatch", "cross_field", "semantic_mismatch", "unknown_field"]


class Violated(ValueError):
    """Raise inside a contract's validator: `field` names the property to fix."""

    def __init__(self, message: str, *, field: str | None = None,
                 code: ViolationCode = "cross_field", allowed: Any = None,
                 grammar: dict[str, Any] | None = None) -> None:
        """`grammar`: a JSON Schema of the values the rule allows, where one can say it
        (`allowed` in words): a repair decodes the field under it."""
        super().__init__(message)
        self.message = message
        self.field = field
        self.code = code
        self.allowed = allowed
        self.grammar = grammar


@dataclass(frozen=True)
class Violation:
    pointer: str  # JSON Pointer into the arguments, "" for the whole call
    code: ViolationCode
    observed: Any
    allowed: Any
    message: str
    # A JSON Schema of the allowed values, for a repair's grammar (`Violated`): not shown.
    grammar: dict[str, Any] | None = field(default=None, compare=False)

    @property
    def field(self) -> str | None:
        """The top-level property this violation is about, if any."""
        parts = self.pointer.split("/")
        return parts[1].replace("~1", "/").replace("~0", "~") if len(parts) > 1 else None

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        del out["grammar"]
        return out

    def feedback(self) -> str:
        where = self.pointer or "the call"
        allowed = f" Allowed: {_words(self.allowed)}." if self.allowed is not None else ""
        return f"- {where}: {self.message} (got {_words(self.observed)}).{allowed}"


_CODES: dict[str, ViolationCode] = {
    "missing": "missing_required",
    "literal_error": "invalid_enum", "enum": "invalid_enum",
    "string_pattern_mismatch": "pattern_mismatch",
    "extra_forbidden": "unknown_field",
}
_RANGE = ("greater_than", "less_than", "too_long", "too_short", "string_too", "multiple_of")


def code_for(error_type: str) -> ViolationCode:
    if error_type in _CODES:
        return _CODES[error_type]
    if error_type.startswith(_RANGE):
        return "out_of_range"
    if error_type == "value_error":
        return "semantic_mismatch"
    return "wrong_type"


def _words(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(repr(v) for v in value)
    return repr(value)
