"""The post-decode validator: the client's own schema, in its own draft, formats asserted.

It runs on every constrained output, whatever the grammar enforced, so a keyword the mask
does not enforce (validator tier) is still never broken in what is returned."""

from __future__ import annotations

from typing import Any

import jsonschema
from jsonschema.protocols import Validator


def validator_for(schema: dict[str, Any] | bool, *, registry: Any = None) -> Validator:
    """A validator for `schema`. Formats are asserted, not just annotated: an output that is
    not a date where the schema says `format: date` is refused (a deliberate difference from
    draft 2020-12's default, where format is an annotation). Every format the enforcement
    report calls checked is checked, whatever the draft: draft-04's own checker knows no
    `date`, so "2022-01-32" would pass there."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    if registry is None:
        return cls(schema, format_checker=_ALL_FORMATS)
    return cls(schema, format_checker=_ALL_FORMATS, registry=registry)


_ALL_FORMATS = jsonschema.FormatChecker()  # the same set as keywords.VALIDATOR_FORMATS
