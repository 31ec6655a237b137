"""anyOf/oneOf/allOf: what the mask keeps of a union, and of what stands beside it."""

from __future__ import annotations

from typing import Any

from grammars.keywords._report import Verdicts
from grammars.keywords._table import KeywordTable

UNIONS = ("anyOf", "oneOf", "allOf")
# What a union's neighbours may be without the mask losing them.
_BESIDE_UNIONS = frozenset({"type", *UNIONS, "$defs", "definitions", "$ref"})
# Keys beside a union that carry the value's shape: with them, the union goes instead.
_SHAPES = ("properties", "enum", "const")


def beside(key: str, node: dict[str, Any], table: KeywordTable) -> Verdicts | None:
    """Beside anyOf/oneOf/allOf, xgrammar 0.2.9's mask takes the branches and ignores other
    assertions (measured: `minimum`, `enum`, `minLength` next to anyOf or a one-branch allOf
    were not enforced; `properties` beside allOf refused valid values). One side goes to the
    validator: the union where `properties`, `enum` or `const` stand beside it (they carry
    the shape; see `classify`), else the assertions beside it."""
    if table.unions_beside_properties or not any(k in node for k in UNIONS) \
            or any(k in node for k in _SHAPES):
        return None
    if key in table.grammar and key not in _BESIDE_UNIONS:
        return [("validator", "beside anyOf/oneOf/allOf the mask takes the branches only: "
                              "checked after decoding")]
    return None


def classify(key: str, value: Any, node: dict[str, Any],
             table: KeywordTable) -> Verdicts | None:
    if key == "allOf" and isinstance(value, list) and len(value) > 1 and not table.multi_allof:
        return [("validator", "allOf with several branches: checked after decoding")]
    if any(k in node for k in _SHAPES) and not table.unions_beside_properties:
        return [("validator", f"{key} beside 'properties', 'enum' or 'const': checked "
                              "after decoding")]
    return None
