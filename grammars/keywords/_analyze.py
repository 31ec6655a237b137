"""The walk: every schema node's keywords classified by family (a tier and a note per
occurrence), then the node's copy in the grammar schema rewritten to match."""

from __future__ import annotations

import copy
from typing import Any

from grammars._walk import iter_schema_nodes
from grammars.keywords import _annotations, _formats, _numbers, _shapes, _strings, _unions
from grammars.keywords._report import Analysis, EnforcementReport, KeywordUse, Tier, Verdicts
from grammars.keywords._table import KeywordTable
from grammars.keywords._vocabulary import JSON_SCHEMA_KEYWORDS, instead


def analyze(schema: dict[str, Any], table: KeywordTable, *,
            copy_of: dict[str, Any] | None = None) -> Analysis:
    """`copy_of`: an equal copy of `schema`, not shared with anything, that becomes the
    grammar schema (a second parse of the same JSON costs less than a deep copy)."""
    grammar_schema = copy_of if copy_of is not None else copy.deepcopy(schema)
    uses: list[KeywordUse] = []
    # Walk the original (for pointers) and edit the copy's matching node.
    originals = list(iter_schema_nodes(schema))
    copies = [node for node, _ in iter_schema_nodes(grammar_schema)]
    targets: dict[str, dict[str, Any]] = {}
    removed: set[str] = set()  # subschemas under validator-only keywords: no mask reaches them
    for (node, pointer), target in zip(originals, copies, strict=True):
        found = _classify_node(node, pointer, table)
        if _under(pointer, removed):
            found = [KeywordUse(u.pointer, u.keyword, "validator", "inside a validator-only "
                                "keyword") if u.tier == "grammar" else u
                     for u in found if not u.implicit]
            tiers = _tiers(found)
        else:
            tiers = _tiers(found)
            more = _rewrite_node(node, pointer, target, table, tiers)
            if more:
                found += more
                tiers = _tiers(found)
            targets[pointer] = target
        removed.update(f"{pointer}/{key}" for key, kinds in tiers.items()
                       if kinds == {"validator"})
        uses.extend(found)
    uses = _unions.oneof_approximations(uses, targets, table)
    return Analysis(EnforcementReport(table.backend, tuple(uses)), grammar_schema)


def _under(pointer: str, removed: set[str]) -> bool:
    """Whether `pointer` is one of `removed` or inside one: its prefixes that end a
    reference token, looked up (one lookup per level; a scan of `removed` per node was
    quadratic: 9 s on CityJSON's schema, whose `removed` holds thousands of keywords)."""
    if not removed:
        return False
    end = pointer.find("/", 1)
    while end != -1:
        if pointer[:end] in removed:
            return True
        end = pointer.find("/", end + 1)
    return pointer in removed


def _classify_node(node: dict[str, Any], pointer: str, table: KeywordTable) -> list[KeywordUse]:
    # Whether a `$ref` or a union stands in the node: read once, not once per keyword.
    ref = isinstance(node.get("$ref"), str)
    union = not node.keys().isdisjoint(_unions.UNIONS)
    uses = [KeywordUse(f"{pointer}/{key}", key, tier, note)
            for key, value in node.items()
            for tier, note in _classify(key, value, node, table, ref=ref, union=union)]
    return uses + _shapes.absent(node, pointer, table)


def _classify(key: str, value: Any, node: dict[str, Any], table: KeywordTable, *,
              ref: bool, union: bool) -> Verdicts:
    """The first family with an opinion decides: annotations, then what stands beside a
    union (it overrides the keyword's own family), then the keyword's family. (`ref`,
    `union`: whether the node holds a `$ref` string, a union.)"""
    found = _annotations.classify(key, value)
    if found is None and ref:
        found = _shapes.beside_ref(key, node, table)
    if found is None and union:
        found = _unions.beside(key, node, table)
    if found is None and key == "format":
        found = _formats.classify(value, node, table)
    if found is None and key in _FAMILIES:
        found = _FAMILIES[key](key, value, node, table)
    if found is not None:
        return found
    if key in table.grammar:
        return [("grammar", _strings.escapes(table, key).lstrip("; "))]
    if key in JSON_SCHEMA_KEYWORDS:
        return [("validator", f"not enforced by {table.backend}'s mask")]
    return _annotations.unknown("unknown keyword: nothing here enforces it" + instead(key),
                                table)


_FAMILIES = {
    **dict.fromkeys(_strings.KEYWORDS, _strings.classify),
    **dict.fromkeys(_numbers.KEYWORDS, _numbers.classify),
    **dict.fromkeys(_unions.UNIONS, _unions.classify),
    **dict.fromkeys(("required", "items", "$ref"), _shapes.classify),
}


def _rewrite_node(node: dict[str, Any], pointer: str, target: dict[str, Any],
                  table: KeywordTable, tiers: dict[str, set[Tier]]) -> list[KeywordUse]:
    """Edit the node's copy to what the mask should enforce: a keyword the mask does none
    of is left out (which only relaxes the grammar); the families rewrite forms the backend
    reads differently (`tiers`: the node's keywords' tiers). Returns what the copy says
    where a keyword is absent."""
    for key, found in tiers.items():
        if found == {"validator"}:
            target.pop(key, None)
    _annotations.rewrite(node, target)
    _formats.rewrite(node, target, table, tiers)
    _strings.rewrite(node, target, table, tiers)
    _numbers.rewrite(node, target, tiers)
    _shapes.rewrite(node, target, tiers)
    return _shapes.implied_type(node, pointer, target, table) + \
        _shapes.odd_names(node, pointer, target, table)


def _tiers(uses: list[KeywordUse]) -> dict[str, set[Tier]]:
    out: dict[str, set[Tier]] = {}
    for use in uses:
        if not use.implicit:
            out.setdefault(use.keyword, set()).add(use.tier)
    return out
