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
    plain = table.bounded_number_decimals or table.bounded_numbers_without_exponent
    if key in table.grammar and plain and not integer and not isinstance(value, bool):
        if table.number_bounds == "validator":
            return [("validator", "bound on numbers: checked after decoding (policy: "
                                  "--number-bounds validator)")]
        decimals = (f"with at most {table.bounded_number_decimals} decimals and "
                    if table.bounded_number_decimals else "with ")
        return [("grammar", f"numbers are written {decimals}no exponent "
                            "(policy: --number-bounds grammar)")]
    if key in ("exclusiveMinimum", "exclusiveMaximum") and isinstance(value, bool):
        if key in table.grammar:
            return [("grammar", "draft-4 boolean form, rewritten for the grammar")]
        return [("validator", f"not enforced by {table.backend}'s mask")]
    return None


def _multiple_of(value: Any, node: dict[str, Any], table: KeywordTable) -> Verdicts | None:
    if node.get("type") != "integer":
        if table.multiple_of_numbers:
            return None
        return [("validator", f"{table.backend}'s mask checks multipleOf on integers only")]
    if "multipleOf" not in table.grammar or not table.multiple_of_limits \
            or _within(value, node, table.multiple_of_limits):
        return None
    largest, span = table.multiple_of_limits
    return [("validator", f"{table.backend}'s mask drops multipleOf unless it is an integer "
                          f"up to {largest} with both bounds (at most {span} integers apart) "
                          "or none: checked after decoding")]


def _within(divisor: Any, node: dict[str, Any], limits: tuple[int, int]) -> bool:
    """Whether the backend keeps multipleOf on this integer node (xgrammar 0.2.9's rule)."""
    largest, span = limits
    if not isinstance(divisor, (int, float)) or divisor != int(divisor) or divisor > largest:
        return False
    low, high = _bound(node, "minimum", 1), _bound(node, "maximum", -1)
    if low is None and high is None:
        return True
    return low is not None and high is not None and high - low + 1 <= span


def _bound(node: dict[str, Any], inclusive: str, step: int) -> float | None:
    """The tightest integer bound on one side (`step` +1 for below, -1 for above)."""
    exclusive = "exclusiveMinimum" if step > 0 else "exclusiveMaximum"
    found = []
    if _number(node.get(inclusive)):
        draft4 = node.get(exclusive) is True
        found.append(node[inclusive] + (step if draft4 else 0))
    if _number(node.get(exclusive)):
        found.append(node[exclusive] + step)
    if not found:
        return None
    return float(max(found) if step > 0 else min(found))


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def rewrite(node: dict[str, Any], target: dict[str, Any], tiers: dict[str, set[Tier]]) -> None:
    """Draft-4's `exclusiveMinimum: true` beside `minimum` is 2020-12's `exclusiveMinimum:
    <minimum>`, the form backends read."""
    for key, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if isinstance(node.get(key), bool) and "grammar" in tiers.get(key, ()) \
                and target.pop(key) is True and bound in target:
            target[key] = target.pop(bound)
