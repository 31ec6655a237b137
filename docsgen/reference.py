"""Reference pages written from the code, never by hand: every `strictcall serve` flag and
STRICTCALL_* variable (server/settings.py, through the flags server/cli_flags.py makes), the
other commands' flags (their argparse parsers), every metric (server/metrics.py) and every
problem type (server/errors.py)."""

from __future__ import annotations

import argparse
import inspect
import types
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic.fields import FieldInfo

from server.cli_flags import POLICIES_GROUP, flag_of, setting_fields
from server.errors import OutcomeProblem, ServiceError, problem_type
from server.metrics import Series
from server.settings import ENV_PREFIX, GrammarPolicies, Settings

GENERAL = "serving"


@dataclass(frozen=True)
class SettingRow:
    flag: str
    env: str
    default: str
    values: str
    help: str
    group: str


@dataclass(frozen=True)
class ProblemRow:
    slug: str
    title: str
    status: str
    retryable: bool | None  # None: the answer's own `retryable` says (outcome problems)
    openai_type: str
    about: str


def setting_rows(settings: type[Settings] = Settings) -> list[SettingRow]:
    """One row per setting, in the order `strictcall serve --help` shows them."""
    rows = []
    for name, field in setting_fields(settings):
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        group = POLICIES_GROUP if name in GrammarPolicies.model_fields \
            else str(extra.get("group") or GENERAL)
        flag = flag_of(name, field)
        if _inner(field.annotation) is bool:
            flag = f"{flag} / --no-{flag[2:]}"
        rows.append(SettingRow(flag, ENV_PREFIX + name.upper(), _default(field),
                               _values(field), field.description or "", group))
    return rows


def flags_page(rows: Iterable[SettingRow], commands: dict[str, argparse.ArgumentParser]) -> str:
    """The configuration reference: the serve settings by group, then the other commands."""
    by_group: dict[str, list[SettingRow]] = {}
    for row in rows:
        by_group.setdefault(row.group, []).append(row)
    out = ["# Flags and environment variables", "",
           "Generated from `Settings` (server/settings.py) at every docs build. Every "
           "`strictcall serve` flag is also an environment variable; a flag wins over its "
           "variable, which wins over the default. [Configuration](../configuration.md) says "
           "how the three combine.", ""]
    for group, members in by_group.items():
        out += [f"## {group.capitalize()}", "",
                "| flag | environment variable | default | values | what it does |",
                "|---|---|---|---|---|"]
        out += [f"| `{r.flag}` | `{r.env}` | {r.default} | {r.values} | {_cell(r.help)} |"
                for r in members]
        out.append("")
    for name, parser in commands.items():
        out += [f"## `strictcall {name}`", "", _cell(parser.description or ""), "",
                "| flag | default | what it does |", "|---|---|---|"]
        out += [f"| `{spelled}` | {default} | {_cell(help_)} |"
                for spelled, default, help_ in _parser_rows(parser)]
        out.append("")
    return "\n".join(out)


def metrics_page(series: Iterable[Series]) -> str:
    out = ["# Metrics", "",
           "Generated from the metrics registry (server/metrics.py) at every docs build: "
           "every series `GET /metrics` serves, in Prometheus text. "
           "Beside each counter and histogram, prometheus_client also serves its `_created` "
           "timestamp. [Operations](../operations.md#metrics) has example queries.", "",
           "| series | kind | labels | what it counts |", "|---|---|---|---|"]
    out += [f"| `{s.name}` | {s.kind} | {', '.join(f'`{x}`' for x in s.labels) or '-'} | "
            f"{_cell(s.help)} |" for s in series]
    return "\n".join(out) + "\n"


def problem_rows(errors: Iterable[type[ServiceError]],
                 outcomes: Iterable[OutcomeProblem]) -> list[ProblemRow]:
    rows = [ProblemRow(e.slug, e.title, str(e.status), e.retryable, e.openai_type,
                       inspect.cleandoc(e.__doc__ or "")) for e in errors]
    rows += [ProblemRow(o.slug, o.title, "in an invoke answer", None, "-", o.about)
             for o in outcomes]
    return rows


def service_errors(root: type[ServiceError] = ServiceError) -> list[type[ServiceError]]:
    """`root` and every subclass with a slug of its own, in definition order of discovery."""
    found: dict[str, type[ServiceError]] = {}
    pending = [root]
    while pending:
        cls = pending.pop(0)
        found.setdefault(cls.slug, cls)
        pending += cls.__subclasses__()
    return list(found.values())


def problems_page(rows: Iterable[ProblemRow]) -> str:
    rows = list(rows)
    out = ["# Problem types", "",
           "Generated from server/errors.py at every docs build. Every error is "
           "`application/problem+json` (RFC 9457) with OpenAI's `error` object beside it "
           "(on `/v1/messages`, Anthropic's error body with the problem under `strictcall`). "
           f"Its `type` is this page with the slug as anchor: `{problem_type('<slug>')}`. "
           "A client matches on the slug, which never changes. `retryable: true` comes with "
           "`Retry-After`; [Security](../security.md#status-codes) has the status table.", "",
           "| slug | status | title | retryable |", "|---|---|---|---|"]
    out += [f"| [`{r.slug}`](#{r.slug}) | {r.status} | {r.title} | {_retry(r.retryable)} |"
            for r in rows]
    for r in rows:
        out += ["", f"## {r.slug} {{#{r.slug}}}", "",
                f"**{r.title}**, status {r.status}"
                + (f", OpenAI error type `{r.openai_type}`" if r.openai_type != "-" else "")
                + (", retryable" if r.retryable else "") + ".", "", r.about]
    return "\n".join(out) + "\n"


def _retry(retryable: bool | None) -> str:
    return "per answer" if retryable is None else "yes" if retryable else "no"


def _default(field: FieldInfo) -> str:
    value = field.get_default(call_default_factory=True)
    if value is None or value == []:
        return "-"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int) and value >= 2**20 and value % 2**20 == 0:
        return f"`{value}` ({value // 2**20} MiB)"
    return f"`{value}`"


def _values(field: FieldInfo) -> str:
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    inner = _inner(field.annotation)
    if typing.get_origin(inner) is Literal:
        return ", ".join(f"`{v}`" for v in typing.get_args(inner))
    if inner is bool:
        return "on / off"
    if typing.get_origin(inner) is list:
        return f"{extra.get('metavar') or 'value'} (repeatable)"
    kind = {int: "integer", float: "number", Path: "path", str: "text"}.get(inner, "text")
    bounds = [f"{op} {getattr(m, attr)}" for m in field.metadata
              for attr, op in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))
              if getattr(m, attr, None) is not None]
    return kind + (f" ({', '.join(bounds)})" if bounds else "")


def _inner(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _parser_rows(parser: argparse.ArgumentParser) -> list[tuple[str, str, str]]:
    rows = []
    for action in parser._actions:  # argparse has no public list of a parser's arguments
        if isinstance(action, argparse._HelpAction):
            continue
        spelled = ", ".join(action.option_strings) or action.dest.upper()
        if action.choices and not action.option_strings:
            spelled += " (" + " \\| ".join(map(str, action.choices)) + ")"
        default = "-" if action.default in (None, argparse.SUPPRESS, False, [], "") \
            else f"`{action.default}`"
        rows.append((spelled, default, (action.help or "").replace("%%", "%")))
    return rows


def _cell(text: str) -> str:
    """Text that stays inside one Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")
