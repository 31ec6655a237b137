"""Whether a parsed value is JSON text's: the fast answer, for the common case.

Python's parser accepts what JSON has no way to write (NaN, Infinity, a lone UTF-16
surrogate), and every reader after it recurses. The request gate and the schema check each
word the first such problem with its place (a walk that builds a path per value: about 50
ms on a 938 kB Kubernetes schema). Nearly every value has none, so both ask this first: one
walk with no paths, a string's check skipped where it is ASCII (about 4 ms on that schema).
Only a value this refuses is walked again, to say where."""

from __future__ import annotations

import math
import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")
_SCALARS = (int, bool, type(None))


def has_surrogate(text: str) -> bool:
    """Whether `text` holds a lone UTF-16 surrogate (\\ud800-\\udfff): no UTF-8 encoder
    can write it."""
    return not text.isascii() and _SURROGATE.search(text) is not None


def plain_json(value: Any, max_nesting: int) -> bool:
    """True where `value` has no lone surrogate in a string or key, no float that is not
    finite, and no container nested `max_nesting` or more deep below the top one; False
    where it has one, or a type other than what `json.loads` makes (the caller's own walk
    then decides)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind is dict:
            if depth >= max_nesting:
                return False
            for key in item:
                if type(key) is not str or has_surrogate(key):
                    return False
            children = item.values()
        elif kind is list:
            if depth >= max_nesting:
                return False
            children = item
        else:
            children = (item,)
            depth -= 1  # the top value itself, a scalar
        for child in children:
            kind = type(child)
            if kind is str:
                if has_surrogate(child):
                    return False
            elif kind is dict or kind is list:
                stack.append((child, depth + 1))
            elif kind is float:
                if not math.isfinite(child):
                    return False
            elif kind not in _SCALARS:
                return False
    return True
