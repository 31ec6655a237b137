"""Grounded fields in a schema: an object's property that may only take the values found
for it (copied from a conversation by the server), or null for "not given". Grounded
properties become required, so the model always says which; properties that may be left
"not given" without being grounded (a question to ask instead) get a null branch."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from grammars.keywords import KeywordUse

GROUNDED = "x-strictcall-grounded"
NOT_GIVEN: dict[str, Any] = {"type": "null"}


def grounded_schema(schema: dict[str, Any], candidates: Mapping[str, Sequence[Any]], *,
                    nullable: Sequence[str] = ()) -> dict[str, Any]:
    """`schema` with each property in `candidates` narrowed to those values or null, and
    each one in `nullable` widened by null. The rest is unchanged (a fresh copy)."""
    out = copy.deepcopy(schema)
    props = out.get("properties")
    if not isinstance(props, dict):
        return out
    for name, values in candidates.items():
        if name not in props:
            continue
        old = props[name] if isinstance(props[name], dict) else {}
        branches: list[dict[str, Any]] = [{"enum": list(values)}] if values else []
        props[name] = {**({"description": old["description"]} if "description" in old
                          else {}), "anyOf": [*branches, NOT_GIVEN]}
    for name in nullable:
        if name in props and name not in candidates:
            props[name] = {"anyOf": [props[name], NOT_GIVEN]}
    required = set(out.get("required") or ()) | {n for n in candidates if n in props}
    out["required"] = [n for n in props if n in required]
    return out


def grounding_uses(counts: Mapping[str, int], *, prefix: str = "") -> tuple[KeywordUse, ...]:
    """The enforcement report's lines: each grounded property, and how many values it
    had to choose from."""
    return tuple(KeywordUse(f"{prefix}/properties/{name}", GROUNDED, "grammar",
                            f"{n} value(s) from the conversation, or not given")
                 for name, n in counts.items())
