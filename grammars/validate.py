"""The post-decode validator: the client's own schema, in its own draft, formats asserted.

It runs on every constrained output, whatever the grammar enforced, so a keyword the mask
does not enforce (validator tier) is still never broken in what is returned."""

from __future__ import annotations

import functools
from typing import Any

import jsonschema
from jsonschema.protocols import Validator


def validator_for(schema: dict[str, Any] | bool, *, registry: Any = None) -> Validator:
    """A validator for `schema`. Formats are asserted, not just annotated: an output that is
    not a date where the schema says `format: date` is refused (a deliberate difference from
    draft 2020-12's default, where format is an annotation). Every format the enforcement
    report calls checked is checked, whatever the draft: the schema's own draft decides what a
    format means where it defines it (draft-03's `time` has no zone), and 2020-12's checker
    covers the rest (draft-04's checker knows no `date`: "2022-01-32" would pass)."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    checker = _format_checker(cls)
    if registry is None:
        return cls(schema, format_checker=checker)
    return cls(schema, format_checker=checker, registry=registry)


@functools.cache
def _format_checker(cls: Any) -> jsonschema.FormatChecker:
    checker = jsonschema.FormatChecker(formats=())
    checker.checkers = {**jsonschema.Draft202012Validator.FORMAT_CHECKER.checkers,
                        **cls.FORMAT_CHECKER.checkers}
    return checker
