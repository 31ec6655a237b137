"""The policy file (`--policy FILE`, YAML or TOML by its suffix), checked once at startup.
Every error is one line that names the file, the line and what to change:

    identity_headers: {tenant: X-Tenant-Id, roles: X-Roles}   # used when API keys are off
    default: allow                                            # when no rule matches
    catalogs:
      support: [check_access_request_status, open_urgent_ticket]
    rules:                                                    # first match decides
      - {tools: [open_urgent_ticket], roles: [support-lead], decision: allow}
      - {tools: [open_urgent_ticket], roles: [support-agent], decision: approval_required,
         approve_fields: [request_id, summary]}
      - {kinds: [write], tenants: [guest], decision: deny}
      - {tools: ["reissue_*"], decision: hidden}
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Sequence
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from contracts import ContractRegistry, Kind, Risk
from server.execution.policy import Decision, Rule, ToolPolicy

# A path into the parsed policy (keys and indexes) -> the line it was written on.
LineOf = Callable[[tuple[Any, ...]], int | None]

_HEADER = r"^[A-Za-z0-9-]{1,64}$"


class PolicyFileError(Exception):
    """A policy file that cannot be used; the message is one line naming the line and fix."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Headers(_Model):
    tenant: str = Field("X-Tenant-Id", pattern=_HEADER)
    roles: str = Field("X-Roles", pattern=_HEADER)


class _Rule(_Model):
    tools: list[str] = Field(default_factory=lambda: ["*"], min_length=1)
    kinds: list[Kind] | None = None
    risks: list[Risk] | None = None
    tenants: list[str] | None = None
    roles: list[str] | None = None
    decision: Decision
    approve_fields: list[str] | None = None

    @model_validator(mode="after")
    def _fields_need_approval(self) -> _Rule:
        if self.approve_fields is not None and self.decision != "approval_required":
            raise ValueError("approve_fields only goes with decision: approval_required")
        return self


class _PolicyFile(_Model):
    identity_headers: _Headers = Field(default_factory=_Headers)
    default: Decision = "allow"
    catalogs: dict[str, list[str]] = Field(default_factory=dict)
    rules: list[_Rule] = Field(default_factory=list)


def load_policy(path: Path, registry: ContractRegistry) -> ToolPolicy:
    """Parse, validate and check `path` against the registered contracts."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyFileError(f"cannot read the policy file {str(path)!r}: "
                              f"{exc.strerror or exc}") from None
    toml = path.suffix.lower() == ".toml"
    raw, lines = _parse_toml(path, text) if toml else _parse_yaml(path, text)
    try:
        parsed = _PolicyFile.model_validate(raw if raw is not None else {})
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = tuple(first["loc"])
        where = ".".join(map(str, loc)) or "the file"
        raise PolicyFileError(f"{_at(path, lines(loc))}: {where}: "
                              f"{first['msg'].removeprefix('Value error, ')}") from None
    _check(path, parsed, registry, lines)
    rules = tuple(_rule(r, lines(("rules", i))) for i, r in enumerate(parsed.rules))
    return ToolPolicy(rules, parsed.default,
                      {name: tuple(tools) for name, tools in parsed.catalogs.items()},
                      parsed.identity_headers.tenant, parsed.identity_headers.roles,
                      source=str(path))


def _rule(r: _Rule, line: int | None) -> Rule:
    def opt(values: Sequence[str] | None) -> frozenset[str] | None:
        return frozenset(values) if values is not None else None
    return Rule(r.decision, tuple(r.tools), opt(r.kinds), opt(r.risks), opt(r.tenants),
                opt(r.roles), tuple(r.approve_fields) if r.approve_fields else None, line)


def _check(path: Path, parsed: _PolicyFile, registry: ContractRegistry, lines: LineOf) -> None:
    """What the schema cannot say: catalogs name registered, offerable tools; approved
    fields exist on the contracts the rule names."""
    for name, tools in parsed.catalogs.items():
        for i, tool in enumerate(tools):
            contract = registry.get(tool)
            if contract is None or contract.catalog.lifecycle == "retired":
                why = "no contract by that name is registered" if contract is None \
                    else "it is retired"
                raise PolicyFileError(
                    f"{_at(path, lines(('catalogs', name, i)))}: catalogs.{name}[{i}]: "
                    f"{tool!r} cannot be in a catalog: {why}; registered: {registry.names()}")
    for i, rule in enumerate(parsed.rules):
        for contract in registry:
            if not any(fnmatchcase(contract.name, p) for p in rule.tools) or \
                    (rule.kinds is not None and contract.catalog.kind not in rule.kinds):
                continue
            unknown = sorted(set(rule.approve_fields or ()) - set(contract.model.model_fields))
            if unknown:
                raise PolicyFileError(
                    f"{_at(path, lines(('rules', i, 'approve_fields')))}: rules[{i}]: "
                    f"approve_fields {unknown} are not fields of {contract.name!r}; its "
                    f"fields are {sorted(contract.model.model_fields)}")


def _at(path: Path, line: int | None) -> str:
    return f"the policy file {str(path)!r}" + (f", line {line}" if line else "")


def _parse_yaml(path: Path, text: str) -> tuple[Any, LineOf]:
    try:
        node = yaml.compose(text)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise PolicyFileError(f"{_at(path, line)}: {problem} (the file must be YAML, or "
                              "TOML when it ends in .toml)") from None
    if data is not None and not isinstance(data, dict):
        raise PolicyFileError(f"{_at(path, 1)}: the policy must be a mapping (identity_headers, "
                              "default, catalogs, rules)")

    def line_of(loc: tuple[Any, ...]) -> int | None:
        current, line = node, (node.start_mark.line + 1 if node is not None else None)
        for part in loc:
            current = _child(current, part)
            if current is None:
                break
            line = current.start_mark.line + 1
        return line
    return data, line_of


def _child(node: Any, part: Any) -> Any:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if key.value == str(part):
                return value
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int) \
            and part < len(node.value):
        return node.value[part]
    return None


def _parse_toml(path: Path, text: str) -> tuple[Any, LineOf]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"line (\d+)", str(exc))
        line = int(found.group(1)) if found else len(text.splitlines()) or 1  # at the end
        raise PolicyFileError(f"{_at(path, line)}: "
                              f"{str(exc).split(' (at')[0]} (not valid TOML)") from None
    rows = text.splitlines()

    def line_of(loc: tuple[Any, ...]) -> int | None:
        """The line of `[[rules]]` number loc[1] (or of its key loc[2]), of `[catalogs]`'s
        key, or of a top-level key: as far as the path can be followed."""
        table, index, best = "", -1, None
        for number, row in enumerate(rows, start=1):
            stripped = row.strip()
            if stripped.startswith("["):
                table = stripped.strip("[] ")
                index += table == str(loc[0]) and stripped.startswith("[[")
                if table == str(loc[0]) and (len(loc) < 2 or index == loc[1]):
                    best = best or number
                continue
            key = stripped.split("=", 1)[0].strip()
            if table == "" and key == str(loc[0]):
                return number
            if table == str(loc[0]) and len(loc) > 1 and (
                    (isinstance(loc[1], int) and index == loc[1] and len(loc) > 2
                     and key == str(loc[2])) or key == str(loc[1])):
                return number
        return best
    return data, line_of
