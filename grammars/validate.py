"""The post-decode validator: the client's own schema, in its own draft, formats asserted.

It runs on every constrained output, whatever the grammar enforced, so a keyword the mask
does not enforce (validator tier) is still never broken in what is returned."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import jsonschema
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator

from grammars.formats import OPENAPI_FORMATS
from grammars.patterns import PatternTimeout, client_regex, matches


def validator_for(schema: dict[str, Any] | bool, *, registry: Any = None) -> Validator:
    """A validator for `schema`. Formats are asserted, not just annotated: an output that is
    not a date where the schema says `format: date` is refused (a deliberate difference from
    draft 2020-12's default, where format is an annotation). Every format the enforcement
    report calls checked is checked, whatever the draft: the schema's own draft decides what a
    format means where it defines it (draft-03's `time` has no zone), and 2020-12's checker
    covers the rest (draft-04's checker knows no `date`: "2022-01-32" would pass); OpenAPI 3's
    data type formats (`int32`, `byte`, ...) are checked too (grammars/formats.py)."""
    cls = _linear(jsonschema.validators.validator_for(
        schema, default=jsonschema.Draft202012Validator))
    checker = _format_checker(cls)
    if registry is None:
        return cls(schema, format_checker=checker)
    return cls(schema, format_checker=checker, registry=registry)


@functools.cache
def _format_checker(cls: Any) -> jsonschema.FormatChecker:
    checker = jsonschema.FormatChecker(formats=())
    checker.checkers = {**jsonschema.Draft202012Validator.FORMAT_CHECKER.checkers,
                        **cls.FORMAT_CHECKER.checkers}
    for name, check in OPENAPI_FORMATS.items():
        checker.checks(name)(check)
    return checker


@functools.cache
def _linear(cls: Any) -> Any:
    """`cls` with the keywords that run a schema's patterns (`pattern`, `patternProperties`,
    and `additionalProperties`, which skips the keys those match) in RE2 (grammars/patterns.py):
    jsonschema runs them in Python's backtracking `re`. (`unevaluatedProperties` beside
    `patternProperties` is refused when the schema arrives: grammars/specs.py.)"""
    return jsonschema.validators.extend(cls, {
        "pattern": _pattern, "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties})


def _pattern(validator: Any, pattern: str, instance: Any,
             schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "string"):
        return
    try:
        found = matches(pattern, instance)
    except PatternTimeout as exc:  # never a silent pass: a violation naming the pattern
        yield ValidationError(str(exc))
        return
    if not found:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, properties: dict[str, Any], instance: Any,
                        schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    try:
        matched = [(key, subschema, pattern) for pattern, subschema in properties.items()
                   for key in instance if client_regex(pattern).search(key) is not None]
    except PatternTimeout as exc:
        yield ValidationError(str(exc))
        return
    for key, subschema, pattern in matched:
        yield from validator.descend(instance[key], subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, additional: Any, instance: Any,
                           schema: dict[str, Any]) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    known = schema.get("properties", {})
    patterns = [client_regex(p) for p in schema.get("patternProperties", {})]
    try:
        extras = [key for key in instance if key not in known
                  and not any(regex.search(key) is not None for regex in patterns)]
    except PatternTimeout as exc:
        yield ValidationError(str(exc))
        return
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        if patterns:
            listed = ", ".join(repr(k) for k in sorted(extras))
            verb = "does" if len(extras) == 1 else "do"
            yield ValidationError(f"{listed} {verb} not match any of the regexes: "
                                  + ", ".join(repr(p) for p in schema["patternProperties"]))
        else:
            listed = ", ".join(repr(k) for k in extras)
            were = "was" if len(extras) == 1 else "were"
            yield ValidationError(
                f"Additional properties are not allowed ({listed} {were} unexpected)")
