"""Complexity budgets, in the spirit of hosted strict modes: a schema over a limit is refused
with the limit's name, the measured value and the limit, before anything compiles."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from grammars._walk import SUB_LIST, SUB_MAP, SUB_ONE, iter_schema_nodes
from grammars.errors import GrammarError


class BudgetExceeded(GrammarError):
    def __init__(self, limit: str, measured: int, allowed: int, *, where: str) -> None:
        self.limit, self.measured, self.allowed = limit, measured, allowed
        super().__init__(f"{where} exceeds the {limit} limit: {measured} > {allowed}",
                         hint="Simplify the schema, or raise the limit on the server "
                              f"(STRICTCALL_{limit.upper()}).")


@dataclass(frozen=True)
class Budget:
    max_tools: int = 20
    max_optional_params: int = 24   # per tool (or response schema): top-level, not required
    max_union_params: int = 16      # per tool: top-level properties that are unions
    max_depth: int = 10             # nesting of subschemas
    max_enum_values: int = 1000     # in any one enum
    max_schema_bytes: int = 100_000  # compact JSON

    def check_tools(self, count: int) -> None:
        if count > self.max_tools:
            raise BudgetExceeded("max_tools", count, self.max_tools, where="the request")

    def check_schema(self, schema: dict[str, Any], *, where: str) -> None:
        # The first reader of a client schema: it measures whatever it is given, surrogates
        # and odd `required` values included (metaschema.py refuses those, with a pointer).
        try:
            size = len(json.dumps(schema, separators=(",", ":"), ensure_ascii=False)
                       .encode("utf-8", "surrogatepass"))
        except RecursionError:  # nested deeper than the encoder goes: max_depth says so
            size = 0
        self._over("max_schema_bytes", size, where)
        self._over("max_depth", _depth(schema), where)
        enums = [len(n["enum"]) for n, _ in iter_schema_nodes(schema)
                 if isinstance(n.get("enum"), list)]
        self._over("max_enum_values", max(enums, default=0), where)
        props = schema.get("properties", {}) if isinstance(schema.get("properties"), dict) \
            else {}
        listed = schema.get("required")
        required = {r for r in listed if isinstance(r, str)} if isinstance(listed, list) \
            else set()
        self._over("max_optional_params", sum(1 for p in props if p not in required), where)
        unions = sum(1 for p in props.values() if isinstance(p, dict) and (
            "anyOf" in p or "oneOf" in p or isinstance(p.get("type"), list)))
        self._over("max_union_params", unions, where)

    def _over(self, limit: str, measured: int, where: str) -> None:
        allowed = getattr(self, limit)
        if measured > allowed:
            raise BudgetExceeded(limit, measured, allowed, where=where)


def _depth(node: Any) -> int:
    """Subschema nesting depth: 1 for a schema with no subschemas. Iterative: a client's
    schema may nest deeper than the stack."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(node, 1)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, dict):
            continue
        deepest = max(deepest, depth)
        children: list[Any] = [item.get(k) for k in SUB_ONE]
        children += [s for k in SUB_LIST if isinstance(item.get(k), list) for s in item[k]]
        children += [s for k in SUB_MAP if isinstance(item.get(k), dict)
                     for s in item[k].values()]
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict))
    return deepest
