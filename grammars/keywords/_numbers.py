"""Numbers: bounds (and the decimals a bounded mask writes), multipleOf, draft-4's boolean
exclusiveMinimum/exclusiveMaximum."""

from __future__ import annotations

from typing import Any

from grammars.keywords._report import Tier, Verdicts
from grammars.keywords._table import KeywordTable

BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
KEYWORDS = (*BOUNDS, "multipleOf")


def classify(key: str, value: Any, node: dict[str, Any],
             table: KeywordTable) -> Verdicts | None:
    integer = node.get("type") == "integer"
    if key == "multipleOf":
        return _multiple_of(value, node, table)
    if key in table.grammar and table.bounded_number_decimals and not integer \
            and not isinstance(value, bool):
        if table.number_bounds == "validator":
            return [("validator", "bound on numbers: checked after decoding (policy: "
                                  "--number-bounds validator)")]
        return [("grammar", f"numbers are written with at most "
                            f"{table.bounded_number_decimals} decimals and no exponent "
                            "(policy: --number-bounds grammar)")]
    if key in ("exclusiveMinimum", "exclusiveMaximum") and isinstance(value, bool):
        if key in table.grammar:
            return [("grammar", "draft-4 boolean form, rewritten for the grammar")]
        return [("validator", f"not enforced by {table.backend}'s mask")]
    return None


def _multiple_of(value: Any, node: dict[str, Any], table: KeywordTable) -> Verdicts | None:
    if node.get("type") == "integer" or table.multiple_of_numbers:
        return None
    return [("validator", f"{table.backend}'s mask checks multipleOf on integers only")]


def rewrite(node: dict[str, Any], target: dict[str, Any], tiers: dict[str, set[Tier]]) -> None:
    """Draft-4's `exclusiveMinimum: true` beside `minimum` is 2020-12's `exclusiveMinimum:
    <minimum>`, the form backends read."""
    for key, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if isinstance(node.get(key), bool) and "grammar" in tiers.get(key, ()):
            if target.pop(key) is True and bound in target:
                target[key] = target.pop(bound)
