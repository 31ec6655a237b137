"""Strings: length bounds, `pattern` (anchoring, lookaround) and the escapes masks leave out."""

from __future__ import annotations

from typing import Any

from grammars.keywords._report import Tier, Verdicts
from grammars.keywords._table import KeywordTable

KEYWORDS = ("minLength", "maxLength", "pattern")


def classify(key: str, value: Any, node: dict[str, Any],
             table: KeywordTable) -> Verdicts | None:
    if key not in table.grammar:
        return None
    if key in table.no_escapes_under and table.bounded_strings == "validator":
        return [("validator", "checked after decoding, so strings with escapes can be "
                              "written (policy: --bounded-strings validator)")]
    patterned = "pattern" in node or "format" in node
    if key in ("minLength", "maxLength") and patterned and not table.lengths_with_pattern:
        return [("validator", "with 'pattern' or 'format', the mask drops length bounds")]
    if key == "pattern" and isinstance(node.get("format"), str) \
            and node["format"] in table.formats and not table.patterns_with_format:
        # Measured on xgrammar 0.2.9: {"format": "uri", "pattern": "^mailto:"} lets
        # "https://a.b/c" through; the format's mask alone applies.
        return [("validator", "beside a 'format' the mask follows the format only: checked "
                              "after decoding")]
    if key == "pattern" and isinstance(value, str):
        return _pattern(value, table)
    return None


def _pattern(pattern: str, table: KeywordTable) -> Verdicts | None:
    notes, late = [], not table.lookaround and bool(_lookarounds(pattern))
    if not _anchored(pattern):
        notes.append("not anchored: compiled with .* where it is open"
                     if table.patterns == "search" else
                     "not anchored: the mask generates whole matches only (policy: "
                     "--patterns full)")
    if late:
        notes.append("compiled without its lookaround assertions")
    if not notes:
        return None
    found: Verdicts = [("grammar", "; ".join(notes) + escapes(table, "pattern"))]
    if late:
        found.append(("validator", "lookaround assertions: checked after decoding"))
    return found


def rewrite(node: dict[str, Any], target: dict[str, Any], table: KeywordTable,
            tiers: dict[str, set[Tier]]) -> None:
    pattern = node.get("pattern")
    if not isinstance(pattern, str) or "grammar" not in tiers.get("pattern", ()):
        return
    if not table.lookaround:
        pattern = _without_lookarounds(pattern)
    if table.patterns == "search" and not _anchored(pattern):
        pattern = search_pattern(pattern)
    target["pattern"] = pattern


def escapes(table: KeywordTable, key: str) -> str:
    if key not in table.no_escapes_under:
        return ""
    return ("; the string is written without escapes (no quote, backslash or control "
            "character; policy: --bounded-strings grammar)")


def search_pattern(pattern: str) -> str:
    """A whole-string pattern that matches what `pattern` finds anywhere (JSON Schema's
    reading), for backends that match whole strings."""
    out = []
    for alt in _alternatives(pattern):
        head, tail = alt.startswith("^"), _ends_anchored(alt)
        body = alt[1 if head else 0:len(alt) - 1 if tail else len(alt)]
        out.append(("" if head else ".*") + f"(?:{body})" + ("" if tail else ".*"))
    return "|".join(out)


def _groups(pattern: str) -> list[tuple[int, int, str]]:
    """(start, end, opening) of each group, outside escapes and classes: `opening` is the
    text after `(` that marks its kind ("?=", "?<!", "?:", ...)."""
    found, stack, in_class, i = [], [], False, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "(":
            stack.append(i)
        elif c == ")" and stack:
            start = stack.pop()
            found.append((start, i + 1, pattern[start + 1:start + 4]))
        i += 1
    return sorted(found)


_LOOKAROUND = ("?=", "?!", "?<=", "?<!")


def _lookarounds(pattern: str) -> list[tuple[int, int]]:
    spans = [(s, e) for s, e, head in _groups(pattern) if head.startswith(_LOOKAROUND)]
    return [(s, e) for s, e in spans if not any(o < s and e <= c for o, c in spans)]


def _without_lookarounds(pattern: str) -> str:
    """`pattern` with its assertions left out: it matches all the original does, and more
    (what xgrammar 0.2.9 does with a lookahead; a lookbehind it would refuse)."""
    for start, end in reversed(_lookarounds(pattern)):
        pattern = pattern[:start] + pattern[end:]
    return pattern


def _alternatives(pattern: str) -> list[str]:
    """The pattern split at its top-level `|` (outside groups and classes)."""
    parts, depth, in_class, start, i = [], 0, False, 0, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            parts.append(pattern[start:i])
            start = i + 1
        i += 1
    return [*parts, pattern[start:]]


def _ends_anchored(alt: str) -> bool:
    escapes_before = len(alt[:-1]) - len(alt[:-1].rstrip("\\"))
    return alt.endswith("$") and escapes_before % 2 == 0


def _anchored(pattern: str) -> bool:
    return all(a.startswith("^") and _ends_anchored(a) for a in _alternatives(pattern))
