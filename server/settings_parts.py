"""The pieces server/settings.py's `Settings` is built from: `setting()`, the one way a
field is declared (its help, help section and flag), the grammar policies' model, the help
sections, and the source that reads the policies' variables under their flags' names."""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue
from pydantic_settings import PydanticBaseSettingsSource

from grammars import POLICY_FLAGS

ENV_PREFIX = "STRICTCALL_"


def setting(default: Any, help: str, *, group: str | None = None, flag: str | None = None,
            metavar: str | None = None, **constraints: Any) -> Any:
    """A settings field: `help` is its command-line help; `group` the help section;
    `flag` a name other than --<field-name>."""
    extra: dict[str, JsonValue] = {
        k: v for k, v in (("group", group), ("flag", flag), ("metavar", metavar)) if v}
    return Field(default, description=help, json_schema_extra=extra or None, **constraints)


def _policy_help(name: str) -> str:
    return next(f.help for f in POLICY_FLAGS if f.name == name)


class GrammarPolicies(BaseModel):
    """What the masks generate where a backend and JSON Schema read a keyword differently
    (grammars/policy.py POLICY_FLAGS holds each policy's reading; a test keeps the two
    alike). As flags and variables they keep their own names: --strict-objects,
    STRICTCALL_STRICT_OBJECTS."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    strict_objects: bool = Field(True, description=_policy_help("strict_objects"))
    unknown_keywords: Literal["rejected", "annotation"] = Field(
        "rejected", description=_policy_help("unknown_keywords"))
    patterns: Literal["full", "search"] = Field("full", description=_policy_help("patterns"))
    implied_types: bool = Field(True, description=_policy_help("implied_types"))
    number_bounds: Literal["grammar", "validator"] = Field(
        "grammar", description=_policy_help("number_bounds"))
    bounded_strings: Literal["grammar", "validator"] = Field(
        "grammar", description=_policy_help("bounded_strings"))


POLICY_NAMES = tuple(GrammarPolicies.model_fields)


def nested_policies(data: Any) -> Any:
    """Settings' input with the policies given flat (strict_objects=False,
    --strict-objects) moved under `policies`."""
    if isinstance(data, dict) and any(n in data for n in POLICY_NAMES):
        flat = {n: data.pop(n) for n in POLICY_NAMES if n in data}
        nested = data.get("policies") or {}
        if isinstance(nested, GrammarPolicies):
            nested = nested.model_dump()
        data["policies"] = {**nested, **flat}
    return data
VLLM = "vLLM engine arguments (with --engine vllm)"
UPSTREAM = "upstream vLLM servers (with --engine upstream)"
STATE = "shared state (for replicas)"
ACCESS = "who may call, and how much"
TOOLS = "the execution layer"
RECORDS = "records"
SCHEDULE = "scheduling (torch and llamacpp engines)"


class PolicyEnv(PydanticBaseSettingsSource):
    """STRICTCALL_STRICT_OBJECTS and its siblings: the policies' variables keep the names
    their flags have, not pydantic-settings' nested STRICTCALL_POLICIES__..."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        found = {n: os.environ[ENV_PREFIX + n.upper()] for n in POLICY_NAMES
                 if ENV_PREFIX + n.upper() in os.environ}
        return {"policies": found} if found else {}
