"""Decoded JSON, read and checked against a schema; ids the pipeline gives out."""

from __future__ import annotations

import json
import uuid
from typing import Any

from grammars import validator_for
from server.errors import OutputInvalid


def parse_json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:  # the grammar makes this unreachable; say so if not
        raise OutputInvalid(f"decoded output is not JSON ({exc.msg} at {exc.pos})") from None


def validate(schema: dict[str, Any], value: Any, *, where: str) -> None:
    errors = sorted(validator_for(schema).iter_errors(value),
                    key=lambda e: list(e.absolute_path))
    if errors:
        violations = [{"pointer": "/" + "/".join(str(p) for p in e.absolute_path),
                       "message": e.message} for e in errors]
        raise OutputInvalid(f"{where} failed validation: {violations[0]['message']}",
                            extensions={"violations": violations})


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def new_answer_id() -> str:
    return uuid.uuid4().hex
