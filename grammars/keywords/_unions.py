"""anyOf/oneOf/allOf: what the mask keeps of a union, of what stands beside it, and of
oneOf's "exactly one"."""

from __future__ import annotations

from typing import Any

from grammars.keywords._report import KeywordUse, Verdicts
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
    if table.unions_beside_properties or node.keys().isdisjoint(UNIONS) \
            or not node.keys().isdisjoint(_SHAPES):
        return None
    if key in table.grammar and key not in _BESIDE_UNIONS:
        return [("validator", "beside anyOf/oneOf/allOf the mask takes the branches only: "
                              "checked after decoding")]
    return None


def classify(key: str, value: Any, node: dict[str, Any],
             table: KeywordTable) -> Verdicts | None:
    if key == "allOf" and isinstance(value, list) and len(value) > 1 and not table.multi_allof:
        return [("validator", "allOf with several branches: checked after decoding")]
    if not node.keys().isdisjoint(_SHAPES) and not table.unions_beside_properties:
        return [("validator", f"{key} beside 'properties', 'enum' or 'const': checked "
                              "after decoding")]
    return None


def oneof_approximations(uses: list[KeywordUse], targets: dict[str, dict[str, Any]],
                         table: KeywordTable) -> list[KeywordUse]:
    """`uses` with each oneOf the mask reads as anyOf split: "at least one branch" stays
    with the mask, "exactly one" goes to the validator. Decided on the compiled copy (its
    branches as rewritten), as the backend sees them."""
    if table.overlapping_oneof:
        return uses
    out = []
    for use in uses:
        out.append(use)
        if use.keyword != "oneOf" or use.tier != "grammar":
            continue
        branches = targets[use.pointer[:-len("/oneOf")]].get("oneOf")
        if not isinstance(branches, list) or exactly_one(branches):
            continue
        out[-1] = use._replace(note="the mask takes any branch: its branches are "
                                                "not provably disjoint")
        out.append(KeywordUse(use.pointer, use.keyword, "validator",
                              "exactly one branch: checked after decoding"))
    return out


def exactly_one(branches: list[Any]) -> bool:
    """Whether a mask that takes any branch enforces oneOf: one branch, or branches proven
    pairwise disjoint by xgrammar 0.2.9's rule (cpp/json_schema_converter.cc,
    TryProvePairwiseDisjointOneOf): a required property every branch pins to distinct
    const/enum values, or branches that are each only a type set (no object) or a
    const/enum, with no type or value in common (integer and number overlap)."""
    return len(branches) <= 1 or _discriminated(branches) or _typed_or_finite(branches)


def _discriminated(branches: list[Any]) -> bool:
    for key in _candidates(branches[0]):
        values = [_discriminator_values(b, key) for b in branches]
        if all(v is not None for v in values) and _pairwise(values, _values_overlap):
            return True
    return False


def _candidates(branch: Any) -> list[str]:
    if not isinstance(branch, dict) or not isinstance(branch.get("required"), list) \
            or not isinstance(branch.get("properties"), dict):
        return []
    props = branch["properties"]
    return [k for k in branch["required"] if isinstance(k, str)
            and isinstance(props.get(k), dict) and _finite(props[k]) is not None]


def _discriminator_values(branch: Any, key: str) -> list[Any] | None:
    if not isinstance(branch, dict) or _combined(branch) or branch.get("type") != "object":
        return None
    required, props = branch.get("required"), branch.get("properties")
    if not isinstance(required, list) or not all(isinstance(k, str) for k in required) \
            or key not in required or not isinstance(props, dict) \
            or not isinstance(props.get(key), dict):
        return None
    return _finite(props[key])


def _typed_or_finite(branches: list[Any]) -> bool:
    arms = [_arm(b) for b in branches]
    return all(a is not None for a in arms) and _pairwise(arms, _arms_overlap)


def _pairwise(items: list[Any], overlap: Any) -> bool:
    return not any(overlap(items[i], items[j])
                   for i in range(len(items)) for j in range(i + 1, len(items)))


def _combined(branch: dict[str, Any]) -> bool:
    return any(k in branch for k in ("$ref", *UNIONS))


def _finite(schema: dict[str, Any]) -> list[Any] | None:
    """The values a const/enum schema allows, None for any other."""
    if "const" in schema:
        return [schema["const"]]
    enum = schema.get("enum")
    return list(enum) if isinstance(enum, list) and enum else None


# Keys xgrammar 0.2.9 lets stand beside `type` in a type-set branch.
_ANNOTATIONS = frozenset({"title", "default", "description", "examples", "deprecated",
                          "readOnly", "writeOnly", "$comment", "$schema"})
_TYPES = frozenset({"null", "boolean", "object", "array", "number", "string", "integer"})


def _arm(branch: Any) -> tuple[str, Any] | None:
    """("values", [...]) for a const/enum branch, ("types", {...}) for a bare type set."""
    if not isinstance(branch, dict) or _combined(branch):
        return None
    values = _finite(branch)
    if values is not None:
        return ("values", values)
    if "type" not in branch or not set(branch) <= _ANNOTATIONS | {"type"}:
        return None
    types = branch["type"]
    types = [types] if isinstance(types, str) else types
    if not isinstance(types, list) or not types or not all(t in _TYPES for t in types) \
            or "object" in types:
        return None
    return ("types", set(types))


def _arms_overlap(a: tuple[str, Any], b: tuple[str, Any]) -> bool:
    if a[0] == b[0] == "types":
        numeric = {"integer", "number"}
        return bool(a[1] & b[1]) or bool(a[1] & numeric and b[1] & numeric)
    if a[0] == b[0] == "values":
        return _values_overlap(a[1], b[1])
    values, types = (a[1], b[1]) if a[0] == "values" else (b[1], a[1])
    return any(_of_types(v, types) for v in values)


def _values_overlap(a: list[Any], b: list[Any]) -> bool:
    return any(_may_overlap(x, y) for x in a for y in b)


def _may_overlap(a: Any, b: Any) -> bool:
    """xgrammar's JSONValuesMayOverlap: numbers equal only if both are int64 (1 and 1.0
    may be the same number); containers compared member by member."""
    if _numeric(a) or _numeric(b):
        return _numeric(a) and _numeric(b) and (a == b or not (_int64(a) and _int64(b)))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_may_overlap, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_may_overlap(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _numeric(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _int64(value: Any) -> bool:
    return isinstance(value, int) and -2 ** 63 <= value < 2 ** 63


def _of_types(value: Any, types: set[str]) -> bool:
    if _numeric(value):
        return bool(types & {"integer", "number"})
    kinds = {type(None): "null", bool: "boolean", str: "string", list: "array",
             dict: "object"}
    return kinds.get(type(value)) in types
