"""A value's shape: objects (required, strict objects, keys others open up), arrays (tuple
items, sizes), `$ref`s, and the type a schema without `type` is generated as."""

from __future__ import annotations

from typing import Any

from grammars.keywords._report import KeywordUse, Tier, Verdicts
from grammars.keywords._table import KeywordTable
from grammars.keywords._unions import UNIONS

# Keywords whose presence lets an object hold keys beyond `properties`: with them, a strict
# grammar ("no unlisted keys") would refuse valid values, so the grammar schema allows extras.
_OPENS_OBJECT = ("patternProperties", "unevaluatedProperties", "dependentSchemas", "if",
                 "then", "else", "dependencies", *UNIONS)

_TYPE_KEYWORDS = {
    "object": ("properties", "required", "additionalProperties", "minProperties",
               "maxProperties"),
    "array": ("items", "prefixItems", "minItems", "maxItems"),
    "string": ("minLength", "maxLength", "pattern", "format"),
    "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
}
ALL_TYPES = ("object", "array", "string", "number", "boolean", "null")


def classify(key: str, value: Any, node: dict[str, Any],
             table: KeywordTable) -> Verdicts | None:
    if key == "required" and isinstance(value, list) and not table.required_unlisted \
            and not set(value) <= set(node.get("properties") or {}):
        # Names `properties` does not list: the mask refuses them (or, with no properties,
        # ignores `required`); listed names stay with the mask.
        return [("validator", "names not in 'properties': checked after decoding")]
    if key == "items" and isinstance(value, list):
        return [("grammar", "draft-4 tuple form, rewritten as prefixItems")]
    if key == "$ref" and isinstance(value, str) and value != "#" \
            and not value.startswith("#/") and key in table.grammar:
        # xgrammar 0.2.9 reads such a $ref (an $id's, an $anchor's, another document's) as
        # any value.
        return [("validator", "a $ref outside '#/...' is not followed by the mask: "
                              "checked after decoding")]
    return None


# Beside a `$ref`, what still holds in every reading: the ref, where refs resolve, and
# definitions (subschemas, not assertions).
_BESIDE_REFS = frozenset({"$ref", "$defs", "definitions", "$id", "$schema", "$anchor",
                          "$dynamicAnchor", "$comment"})


def beside_ref(key: str, node: dict[str, Any], table: KeywordTable) -> Verdicts | None:
    """A keyword beside a `$ref`, where the mask follows the `$ref` alone (measured on
    xgrammar 0.2.9: `minimum`, `maxLength`, `pattern`, `enum`, `const`, `type`, `format`,
    `required` beside a `$ref` were not enforced): the validator's."""
    if table.refs_with_siblings or not isinstance(node.get("$ref"), str) \
            or key in _BESIDE_REFS or key not in table.grammar:
        return None
    return [("validator", "beside '$ref' the mask follows the $ref only: checked after "
                          "decoding")]


def absent(node: dict[str, Any], pointer: str, table: KeywordTable) -> list[KeywordUse]:
    """What the mask does where additionalProperties is absent, under strict objects."""
    if isinstance(node.get("properties"), dict) and "additionalProperties" not in node \
            and node.keys().isdisjoint(_OPENS_OBJECT) and table.strict_objects:
        return [KeywordUse(f"{pointer}/additionalProperties", "additionalProperties",
                           "grammar", "absent: keys not in 'properties' are not generated "
                                      "(strict objects)", implicit=True)]
    return []


def rewrite(node: dict[str, Any], target: dict[str, Any], tiers: dict[str, set[Tier]]) -> None:
    required = node.get("required")
    if "validator" in tiers.get("required", ()) and isinstance(required, list):
        listed = [n for n in required if n in (node.get("properties") or {})]
        if listed:
            target["required"] = listed
    if isinstance(node.get("items"), list) and "items" in target:
        target["prefixItems"] = target.pop("items")
        extra = target.pop("additionalItems", None)
        if extra is not None:
            target["items"] = extra
    if isinstance(node.get("properties"), dict) and "additionalProperties" not in node \
            and not node.keys().isdisjoint(_OPENS_OBJECT):
        target["additionalProperties"] = True
    if "patternProperties" in node and node.get("additionalProperties") is not True:
        target["additionalProperties"] = True
    # xgrammar's strict mode reads an absent additionalProperties/items as false once a
    # size keyword is there ({"type": "array", "minItems": 2} would compile to nothing):
    # where no properties/items are listed, say "anything" explicitly, as JSON Schema means
    # (`true` for objects, `{}` for items: the forms both backends read that way).
    if _may_be(node, "object", ("minProperties", "maxProperties", "required")) \
            and "properties" not in node and "additionalProperties" not in node:
        target["additionalProperties"] = True
    if _may_be(node, "array", ("minItems", "maxItems")) and "items" not in node \
            and "prefixItems" not in node:
        target["items"] = {}


def implied_type(node: dict[str, Any], pointer: str, target: dict[str, Any],
                 table: KeywordTable) -> list[KeywordUse]:
    """xgrammar applies a type's keywords only where `type` says it (measured on 0.2.9:
    {"maxLength": 2} compiles to any value), so the type is always written out: the types
    the keywords left in the compiled copy imply (default), or every type (JSON Schema's
    reading, and beside combinators or `$ref`, whose branches decide the type). Reported
    as the absent `type` it is."""
    if "type" in node or "enum" in node or "const" in node:
        return []
    implied = [kind for kind, keys in _TYPE_KEYWORDS.items()
               if not target.keys().isdisjoint(keys)]
    if not implied:
        return []
    if not table.implied_types or not node.keys().isdisjoint((*UNIONS, "$ref")):
        target["type"] = list(ALL_TYPES)
        return []
    target["type"] = implied[0] if len(implied) == 1 else implied
    return [KeywordUse(f"{pointer}/type", "type", "grammar",
                       f"absent: generated as {' or '.join(implied)}, as its keywords imply "
                       "(JSON Schema accepts any other type too)", implicit=True)]


def odd_names(node: dict[str, Any], pointer: str, target: dict[str, Any],
              table: KeywordTable) -> list[KeywordUse]:
    """Listed properties the mask does not hold to their schemas: where the compiled object
    lets other keys in, a name the backend cannot tell from those keys (non-ASCII, or
    written with an escape) takes any value. Reported at the property's own pointer, for
    the validator: it checks them after decoding."""
    props = node.get("properties")
    extra = target.get("additionalProperties", None if table.strict_objects else True)
    if not table.extras_take_odd_names or not isinstance(props, dict) \
            or extra is None or extra is False:
        return []
    return [KeywordUse(f"{pointer}/properties/{name.replace('~', '~0').replace('/', '~1')}",
                       "properties", "validator",
                       f"{table.backend} lets other keys take the name {name!r} with any "
                       "value: checked after decoding")
            for name in props if any(ord(c) > 126 or c in '"\\' or ord(c) < 32 for c in name)]


def _may_be(node: dict[str, Any], kind: str, keywords: tuple[str, ...]) -> bool:
    types = node.get("type")
    named = types == kind or (isinstance(types, list) and kind in types)
    return named or not node.keys().isdisjoint(keywords)
