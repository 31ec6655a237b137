"""`format`: which formats the mask checks, which only the validator, and which nothing."""

from __future__ import annotations

from typing import Any

from grammars.formats import OPENAPI_ANNOTATION_FORMATS, OPENAPI_FORMATS
from grammars.keywords import _annotations
from grammars.keywords._report import Tier, Verdicts
from grammars.keywords._table import KeywordTable
from grammars.keywords._vocabulary import VALIDATOR_FORMATS


def classify(value: Any, node: dict[str, Any], table: KeywordTable) -> Verdicts:
    formats = _union_of(value, node, table)
    if formats:
        return [("grammar", f"compiled as anyOf formats {list(formats)}: "
                            f"{table.backend}'s {value!r} mask alone is narrower")]
    if value in table.formats and not dict(table.format_unions).get(value):
        # Masks check a format's shape; calendar rules (no February 30) are left to the
        # validator, which checks every format it knows after decoding.
        note = "shape by the mask, the rest after decoding" if value in VALIDATOR_FORMATS \
            else ""
        never = dict(table.format_subsets).get(value)
        if never:
            note += f"{'; ' if note else ''}the mask never writes {never}"
        return [("grammar", note)]
    if value in OPENAPI_FORMATS:
        return [("validator", f"OpenAPI format {value!r}: checked after decoding")]
    if value in VALIDATOR_FORMATS:
        return [("validator", f"format {value!r}: checked after decoding")]
    if value in OPENAPI_ANNOTATION_FORMATS:
        return [("annotation", f"OpenAPI format {value!r}: restricts nothing")]
    return _annotations.unknown(f"format {value!r} is checked by nothing here; use a "
                                "'pattern' instead", table)


def rewrite(node: dict[str, Any], target: dict[str, Any], table: KeywordTable,
            tiers: dict[str, set[Tier]]) -> None:
    if node.get("format") in OPENAPI_ANNOTATION_FORMATS:  # no backend need read it
        target.pop("format", None)
    formats = _union_of(node.get("format"), node, table)
    if formats and "grammar" in tiers.get("format", ()):
        target.pop("format")
        target["anyOf"] = _format_union(node.get("type"), formats)


def _union_of(value: Any, node: dict[str, Any], table: KeywordTable) -> tuple[str, ...]:
    """The formats whose masks together make `value`'s, where it is compiled so (a node
    with its own anyOf keeps the backend's mask: the validator checks the rest)."""
    if not isinstance(value, str) or "anyOf" in node:
        return ()
    return dict(table.format_unions).get(value, ())


def _format_union(types: Any, formats: tuple[str, ...]) -> list[dict[str, Any]]:
    """anyOf branches for a format mask made of several: typed branches (xgrammar ignores
    untyped ones), and one for the values other than strings that the node allows."""
    branches: list[dict[str, Any]] = [{"type": "string", "format": f} for f in formats]
    if types is None:
        others = ["number", "boolean", "object", "array", "null"]
    else:
        others = [t for t in ([types] if isinstance(types, str) else types) if t != "string"]
    if others:
        branches.append({"type": others if len(others) > 1 else others[0]})
    return branches
