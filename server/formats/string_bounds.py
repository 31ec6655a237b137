"""String keywords a family's grammar does not hold in xgrammar 0.2.9's mask: taken out of
the tools' schemas for that family's grammar, checked after decoding (contract fields
repaired) and named in the enforcement report's validator tier, with why. Measured per
family by tests/server/formats/test_families.py (a value that breaks the keyword, written
in the family's syntax: its grammar takes it, or refuses the keyword)."""

from __future__ import annotations

import copy
from typing import Any

from grammars import iter_schema_nodes

LENGTHS = ("minLength", "maxLength")
STRING_BOUNDS = ("pattern", "format", *LENGTHS)
_EXCLUDES = ("checked after decoding: this family's arguments keep its markers out of "
             "strings, beside which xgrammar ignores a length in the mask")
# family -> (the keywords its grammar does not hold, why)
LEFT_LATE: dict[str, tuple[tuple[str, ...], str]] = {
    # MiniMax M3's XML keeps its namespace marker out of every string value; xgrammar
    # refuses to combine that exclusion with a pattern, a format or a length.
    "minimax_m3": (STRING_BOUNDS, "checked after decoding: this family's XML arguments "
                                  "exclude its namespace marker from strings, which "
                                  "xgrammar cannot combine with a pattern, format or "
                                  "length in the mask"),
    # Gemma 4's and Kimi K3's tags keep their markers out of strings (`excludes`); beside
    # that xgrammar ignores a length with a warning only ("Ignoring the length constraints
    # ... not applied together with JSONSchemaFormat.excludes"): a string ran past
    # maxLength. Pattern and format hold. (Written as a pattern, `^[\s\S]{0,20}$`, Gemma
    # 4's mask holds a length with its markers kept out, but compiling it took 3.7 s over
    # SmolLM2's vocabulary, past the 10 s compile limit under load; Kimi K3's mask lets its
    # markers into a patterned string.)
    "gemma_4": (LENGTHS, _EXCLUDES),
    "kimi_k3": (LENGTHS, _EXCLUDES),
    # Qwen3.5's and Qwen3-Coder's XML writes a value between newlines
    # (`<parameter=city>\nJ\n</parameter>`): the mask takes a value shorter than minLength
    # (MiMo's, the same style without the newlines, does not).
    "qwen_3_5": (("minLength",), "checked after decoding: the mask of this family's XML, "
                                 "which writes a value between newlines, takes a shorter "
                                 "string"),
    "qwen_3_coder": (("minLength",), "checked after decoding: the mask of this family's "
                                     "XML, which writes a value between newlines, takes a "
                                     "shorter string"),
}


def without(schema: dict[str, Any], keywords: tuple[str, ...]) -> tuple[dict[str, Any],
                                                                       list[str]]:
    """`schema` without these string keywords, and the JSON Pointers of those taken out."""
    out: dict[str, Any] = copy.deepcopy(schema)
    taken: list[str] = []
    for node, pointer in iter_schema_nodes(out):
        for key in keywords:
            if key in node:
                del node[key]
                taken.append(f"{pointer}/{key}")
    return out, taken


def left_late(family: str, tools: list[tuple[str, dict[str, Any]]]
              ) -> tuple[list[tuple[str, dict[str, Any]]], tuple[tuple[str, str], ...]]:
    """The tools' schemas as `family`'s grammar holds them, and the keywords taken out for
    the validator ("tool#pointer", why)."""
    if family not in LEFT_LATE:
        return tools, ()
    keywords, why = LEFT_LATE[family]
    out, late = [], []
    for name, schema in tools:
        bounded, taken = without(schema, keywords)
        out.append((name, bounded))
        late += [(f"{name}#{pointer}", why) for pointer in taken]
    return out, tuple(late)
