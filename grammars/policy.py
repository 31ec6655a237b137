"""The grammar policy: what this server's masks enforce, decided once.

A backend's measured keyword table (a fact about that backend and version) with the server's
generation policies applied (choices: strict objects, patterns as whole matches, ...). It is
built once from the settings and passed explicitly to everything that turns a schema into a
grammar (requests, repairs, start-up warm-up, the compile endpoint, the bench), so that the
same schema always gets the same grammar and the same cache key.

The policies' names, values, defaults and help texts live here and in `KeywordTable`: the
settings, the command line and the bench read them from `POLICY_FLAGS`.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any, Literal

from grammars.backend_types import GrammarBackend
from grammars.keywords import JSON_SCHEMA_READING, POLICIES, Analysis, KeywordTable, with_policies
from grammars.specs import JsonSchemaSpec, ToolSpec, check_schema


@dataclass(frozen=True)
class PolicyFlag:
    """One generation policy: a `KeywordTable` field, a setting and a command-line flag."""

    name: str
    help: str

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def annotation(self) -> Any:
        return typing.get_type_hints(KeywordTable)[self.name]

    @property
    def choices(self) -> tuple[str, ...] | None:
        """The allowed values of a many-valued policy; None for an on/off one."""
        hint = self.annotation
        return typing.get_args(hint) if typing.get_origin(hint) is Literal else None

    @property
    def default(self) -> Any:
        return next(f.default for f in dataclasses.fields(KeywordTable) if f.name == self.name)

    @property
    def json_schema_reading(self) -> Any:
        return JSON_SCHEMA_READING[self.name]


POLICY_FLAGS: tuple[PolicyFlag, ...] = (
    PolicyFlag("strict_objects",
               "objects that list properties get no other keys, as in vLLM and OpenAI's "
               "strict mode (default on); off: other keys allowed unless "
               "additionalProperties says no"),
    PolicyFlag("unknown_keywords",
               "schema keywords no vocabulary here knows: refused with a 400 (default) or "
               "kept as annotations"),
    PolicyFlag("patterns",
               "'pattern' as a whole-string match (default, as every constrained decoder) or, "
               "as JSON Schema reads it, a match anywhere"),
    PolicyFlag("implied_types",
               "a schema without 'type' is generated as the type its keywords imply "
               "(default on); off: any type, as JSON Schema reads it"),
    PolicyFlag("number_bounds",
               "bounds on numbers: in the mask, which writes at most 6 decimals and no "
               "exponent (default), or checked after decoding only"),
    PolicyFlag("bounded_strings",
               "lengths and patterns: in the mask, which writes such strings without escapes "
               "(default), or checked after decoding only"),
)
assert tuple(f.name for f in POLICY_FLAGS) == POLICIES, "one flag per keyword policy"

DEFAULT_POLICIES: dict[str, Any] = {f.name: f.default for f in POLICY_FLAGS}


@dataclass(frozen=True)
class GrammarPolicy:
    """The keyword table requests are planned with: one backend's, policies applied."""

    keywords: KeywordTable

    @classmethod
    def for_backend(cls, backend: GrammarBackend, policies: dict[str, Any] | None = None,
                    *, json_layout: str = "compact") -> GrammarPolicy:
        """Configure `backend` for `policies` (strict objects is a compile option of its
        own) and the JSON layout, and return the policy to plan with. Raises ValueError for
        a policy or layout the backend cannot follow."""
        chosen = {**DEFAULT_POLICIES, **(policies or {})}
        backend.set_strict_objects(chosen["strict_objects"])
        backend.set_json_layout(json_layout)
        return cls(with_policies(backend.keywords, chosen))

    @property
    def backend(self) -> str:
        return self.keywords.backend

    def check(self, schema: Any, *, where: str = "schema") -> Analysis:
        return check_schema(schema, where=where, table=self.keywords)

    def json_schema_spec(self, schema: Any, *, where: str = "schema") -> JsonSchemaSpec:
        return JsonSchemaSpec.from_analysis(self.check(schema, where=where))

    def tool_spec(self, name: str, parameters: Any) -> ToolSpec:
        return ToolSpec.from_analysis(
            name, self.check(parameters, where=f"parameters of tool {name!r}"))
