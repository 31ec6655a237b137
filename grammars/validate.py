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
    draft 2020-12's default, where format is an annotation)."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    if registry is None:
        return cls(schema, format_checker=cls.FORMAT_CHECKER)
    return cls(schema, format_checker=cls.FORMAT_CHECKER, registry=registry)
