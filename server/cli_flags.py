"""`strictcall serve`'s flags, generated from the `Settings` fields: each field is a flag
named after it (or its own `flag`), typed from its annotation (on/off for booleans, the
choices of a Literal, repeatable for a list), with its help and its group. A new setting is
written once, in server/settings.py."""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic.fields import FieldInfo

from server.settings import GrammarPolicies, Settings

POLICIES_GROUP = "grammar policies (what the masks generate where readings differ)"


def setting_fields(settings: type[Settings] = Settings) -> Iterator[tuple[str, FieldInfo]]:
    """Every setting a flag sets, the grammar policies' fields in place of `policies`."""
    for name, field in settings.model_fields.items():
        if name == "policies":
            yield from GrammarPolicies.model_fields.items()
        else:
            yield name, field


def flag_of(name: str, field: FieldInfo) -> str:
    return str(_extra(field).get("flag") or "--" + name.replace("_", "-"))


def add_setting_flags(parser: argparse.ArgumentParser,
                      settings: type[Settings] = Settings) -> None:
    groups: dict[str, Any] = {}
    for name, field in setting_fields(settings):
        group = _extra(field).get("group")
        if name in GrammarPolicies.model_fields:
            group = POLICIES_GROUP
        target: Any = parser if group is None else groups.setdefault(
            str(group), parser.add_argument_group(str(group)))
        target.add_argument(flag_of(name, field), dest=name, help=_help(field),
                            **_kind(field.annotation, field))


def given_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The settings the command line set (flags not given are left to the environment
    and the defaults)."""
    return {name: getattr(args, name) for name, _ in setting_fields()
            if getattr(args, name, None) is not None}


def _extra(field: FieldInfo) -> dict[str, Any]:
    extra = field.json_schema_extra
    return extra if isinstance(extra, dict) else {}


def _help(field: FieldInfo) -> str:
    default = field.get_default(call_default_factory=True)
    shown = "" if default in (None, []) or isinstance(default, bool) else f" (default {default})"
    state = f" (default {'on' if default else 'off'})" if isinstance(default, bool) else ""
    return f"{field.description or ''}{shown or state}".replace("%", "%%")


def _kind(annotation: Any, field: FieldInfo) -> dict[str, Any]:
    """argparse options for a field of this type."""
    inner = _optional_of(annotation)
    metavar = _extra(field).get("metavar")
    out: dict[str, Any] = {"metavar": metavar} if metavar else {}
    if inner is bool:
        return {"action": argparse.BooleanOptionalAction, "default": None}
    if typing.get_origin(inner) is Literal:
        return {"choices": list(typing.get_args(inner)), **out}
    if typing.get_origin(inner) is list:
        return {"action": "append", **out}
    if inner in (int, float, Path):
        return {"type": inner, **out}
    return out  # str


def _optional_of(annotation: Any) -> Any:
    """`X` for `X | None`; the annotation itself otherwise."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation
