"""Annotations and unknown keywords: what changes nothing, and what nothing here knows."""

from __future__ import annotations

from typing import Any

from grammars.keywords._report import Verdicts
from grammars.keywords._table import KeywordTable
from grammars.keywords._vocabulary import ANNOTATION_PREFIXES, ANNOTATIONS, VOCABULARY_OF


def classify(key: str, value: Any) -> Verdicts | None:
    if key in ANNOTATIONS:
        return [("annotation", "")]
    if key in VOCABULARY_OF:
        return [("annotation", f"{VOCABULARY_OF[key]} annotation")]
    if key.startswith(ANNOTATION_PREFIXES):
        return [("annotation", "extension or commented-out key (by its prefix)")]
    if key == "uniqueItems" and value is False:
        return [("annotation", "false has no effect")]
    return None


def unknown(why: str, table: KeywordTable) -> Verdicts:
    if table.unknown_keywords == "annotation":  # left in: a $ref may point into it
        return [("annotation", f"{why} (policy: unknown keywords are annotations)")]
    return [("rejected", why)]


def rewrite(node: dict[str, Any], target: dict[str, Any]) -> None:
    if node.get("uniqueItems") is False:  # no rule: the backend need not read it
        target.pop("uniqueItems", None)
