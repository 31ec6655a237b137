"""Formats beyond JSON Schema's own that the post-decode validator asserts: OpenAPI 3's data
type formats, which schemas generated from OpenAPI documents (Kubernetes' among them) carry.

OpenAPI 3.0 (4.4, Data Types) defines `int32` and `int64` (signed integers of that width),
`float` and `double` (numbers), `byte` (base64-encoded characters), `binary` (any octets)
and `password` (a hint to obscure the input). The first five are rules: each checker below
holds a value of the format's own type to it and passes any other type, as JSON Schema's
format checkers do (the `type` keyword rules on types). `binary` and `password` restrict
nothing: they are annotations."""

from __future__ import annotations

import binascii
import math
from base64 import b64decode
from collections.abc import Callable

_FLOAT_MAX = 3.4028234663852886e38  # the largest finite IEEE 754 binary32 value


def _integer_of(bits: int) -> Callable[[object], bool]:
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def check(instance: object) -> bool:
        if isinstance(instance, bool) or not isinstance(instance, (int, float)):
            return True
        if isinstance(instance, float) and not instance.is_integer():
            return True  # not an integer at all: `type` says so, not the width
        return bool(low <= instance <= high)
    return check


def _float(instance: object) -> bool:
    if isinstance(instance, bool) or not isinstance(instance, (int, float)):
        return True
    return math.isfinite(instance) and abs(instance) <= _FLOAT_MAX


def _double(instance: object) -> bool:
    if isinstance(instance, bool) or not isinstance(instance, (int, float)):
        return True
    try:  # Python reads 1e400 as inf, and 10**400 written out as an int
        return math.isfinite(float(instance))
    except OverflowError:
        return False


def _byte(instance: object) -> bool:
    if not isinstance(instance, str):
        return True
    try:
        b64decode(instance, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


OPENAPI_FORMATS: dict[str, Callable[[object], bool]] = {
    "int32": _integer_of(32), "int64": _integer_of(64), "float": _float, "double": _double,
    "byte": _byte}
OPENAPI_ANNOTATION_FORMATS = frozenset({"binary", "password"})
