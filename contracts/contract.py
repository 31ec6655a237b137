"""`@tool` turns a Pydantic model into a contract: the schema the model may write (runtime
fields left out), and validation that normalizes arguments or returns violations."""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic.json_schema import GenerateJsonSchema

from contracts import clock
from contracts.catalog import (
    KINDS,
    LIFECYCLES,
    RISKS,
    CatalogEntry,
    ExecutionSpec,
    Handler,
    HttpHandler,
    Kind,
    Lifecycle,
    Risk,
)
from contracts.fields import FieldValues
from contracts.markers import FromHeader, Generated, RuntimeSource
from contracts.redaction import redact, redacted_paths
from contracts.violations import Violated, Violation, code_for

M = TypeVar("M", bound=type[BaseModel])
_ATTR = "__strictcall_contract__"


class ContractError(Exception):
    """A contract that cannot be loaded (bad definition, duplicate name, missing header)."""


class MissingRuntimeValue(ContractError):
    def __init__(self, field: str, header: str | None, *, claim: str | None = None) -> None:
        if claim is None:
            message = (f"contract field {field!r} comes from the {header!r} header, which "
                       "the request did not send")
        else:
            message = (f"contract field {field!r} comes from the API key's {claim!r}, which "
                       "this key does not have; give the key one in the key file")
        super().__init__(message)
        self.field, self.header, self.claim = field, header, claim


@dataclass(frozen=True)
class Outcome:
    arguments: dict[str, Any] | None  # normalized (the validated model's JSON) when valid
    violations: tuple[Violation, ...]

    @property
    def valid(self) -> bool:
        return not self.violations


class _NoTitles(GenerateJsonSchema):
    def field_title_should_be_set(self, schema: Any) -> bool:
        return False  # titles only add noise to the prompt


@dataclass(frozen=True)
class Contract:
    name: str
    description: str
    model: type[BaseModel]
    runtime: Mapping[str, RuntimeSource]
    # Tokens of free reasoning before a call to this tool, when the request does not say
    # (0: the server's default). For tools whose arguments take thought.
    reasoning: int = 0
    # Paths of `Redact` fields (contracts.redaction): hidden in the audit log only.
    redacted: tuple[str, ...] = ()
    catalog: CatalogEntry = CatalogEntry()  # owner, kind, risk, lifecycle, version
    execution: ExecutionSpec | None = None  # None: StrictCall returns calls, never runs them
    # What the handler returns, validated before it goes back (None: not checked).
    output: type[BaseModel] | None = None

    @cached_property
    def fields(self) -> FieldValues:
        """Each field (nested ones too) as pydantic validates it on its own: a raw value to
        the JSON value it stands for (contracts.fields). Which fields are Grounded, Ask or
        Confirm is in the schema (contracts.markers)."""
        return FieldValues(self.model)

    def redact(self, value: Any, *, at: str = "") -> Any:
        """`value` (at pointer `at` of this tool's arguments) as an audit record shows it:
        what sits under a `Redact` field is "[redacted]"."""
        return redact(value, self.redacted, at=at)

    def schema(self) -> dict[str, Any]:
        """The JSON Schema of what the model writes: runtime-sourced fields are left out.
        A fresh copy each call: callers may change it."""
        return copy.deepcopy(self._schema)

    @cached_property
    def _schema(self) -> dict[str, Any]:
        full = self.model.model_json_schema(schema_generator=_NoTitles)
        full.pop("title", None)
        props = full.get("properties", {})
        for name in self.runtime:
            props.pop(name, None)
        if "required" in full:
            full["required"] = [r for r in full["required"] if r not in self.runtime]
        full["additionalProperties"] = False
        return full

    def snapshot(self) -> dict[str, Any]:
        """What a schema snapshot records: a change here is a change to the contract."""
        return {"name": self.name, "description": self.description, "parameters": self.schema(),
                "runtime_fields": {f: src.describe() for f, src in self.runtime.items()}}

    def runtime_values(self, headers: Mapping[str, str], *,
                       claims: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The server-filled fields. `claims` is the authenticated caller's identity (None:
        the server checks no keys): a field with an identity claim takes it from `claims`,
        never from a header (contracts.markers says which source each field takes)."""
        lowered = {k.lower(): v for k, v in headers.items()}
        values: dict[str, Any] = {}
        for field, source in self.runtime.items():
            claim = source.identity_claim if isinstance(source, FromHeader) else None
            if claims is not None and claim is not None:
                if claim not in claims:
                    raise MissingRuntimeValue(field, source.header, claim=claim)
                values[field] = claims[claim]
                continue
            sent = lowered.get(source.header.lower()) if source.header else None
            if sent is not None:
                values[field] = sent
            elif isinstance(source, Generated):
                values[field] = source.new_value()
            else:
                raise MissingRuntimeValue(field, source.header)
        return values

    def validate(self, arguments: Any, *, runtime: Mapping[str, Any],
                 today: dt.date | None = None) -> Outcome:
        """Validate model-written `arguments` plus server-filled `runtime` values."""
        if not isinstance(arguments, dict):
            return Outcome(None, (Violation("", "wrong_type", arguments, "a JSON object",
                                            "arguments must be a JSON object"),))
        written = [k for k in arguments if k in self.runtime]
        if written:  # the model (or a client) may never set these
            return Outcome(None, tuple(
                Violation(f"/{k}", "unknown_field", arguments[k], None,
                          "this field is filled by the server, not by the caller")
                for k in written))
        context = {"today": today or clock.today()}
        try:
            model = self.model.model_validate({**arguments, **runtime}, context=context)
        except ValidationError as exc:
            return Outcome(None, _violations(exc, self.schema(), arguments))
        return Outcome(model.model_dump(mode="json"), ())


def tool(*, name: str, description: str, reasoning: int = 0, owner: str = "unowned",
         kind: Kind = "write", risk: Risk = "medium", lifecycle: Lifecycle = "active",
         version: str = "1", handler: Handler | None = None, timeout_s: float = 10.0,
         retries: int = 2, output: type[BaseModel] | None = None) -> Callable[[M], M]:
    """Class decorator: register a Pydantic model as the contract of tool `name`.
    `reasoning`: a budget of free-reasoning tokens before its calls (server/formats).
    Catalog metadata (contracts.catalog): `owner`, `kind`, `risk`, `lifecycle`, `version`;
    `handler` (a Python callable, sync or async, or an `HttpHandler`) lets the server run
    validated calls, each attempt within `timeout_s`, reads retried up to `retries` times;
    `output` is the model its result must fit before it goes back (else the outcome fails)."""
    entry = _catalog_entry(name, owner, kind, risk, lifecycle, version)
    execution = _execution(name, handler, timeout_s, retries)

    def wrap(model: M) -> M:
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise ContractError(f"@tool({name!r}) decorates {model!r}, not a pydantic BaseModel")
        fields: dict[str, Any] = model.__pydantic_fields__  # the class's, not an instance's
        runtime = {field: meta for field, info in fields.items()
                   for meta in info.metadata if isinstance(meta, (FromHeader, Generated))}
        if reasoning < 0:
            raise ContractError(f"@tool({name!r}): reasoning is a token budget, >= 0")
        if output is not None and not (isinstance(output, type)
                                       and issubclass(output, BaseModel)):
            raise ContractError(f"@tool({name!r}): output must be a pydantic BaseModel")
        setattr(model, _ATTR, Contract(name, description, model, runtime, reasoning,
                                       redacted_paths(model), entry, execution, output))
        return model

    return wrap


def _catalog_entry(name: str, owner: str, kind: str, risk: str, lifecycle: str,
                   version: str) -> CatalogEntry:
    for label, value, allowed in (("kind", kind, KINDS), ("risk", risk, RISKS),
                                  ("lifecycle", lifecycle, LIFECYCLES)):
        if value not in allowed:
            raise ContractError(f"@tool({name!r}): {label}={value!r} is not one of "
                                f"{list(allowed)}")
    if not owner or not version:
        raise ContractError(f"@tool({name!r}): owner and version must not be empty")
    return CatalogEntry(owner, kind, risk, lifecycle, version)  # type: ignore[arg-type]  # checked against the literal sets above


def _execution(name: str, handler: Handler | None, timeout_s: float,
               retries: int) -> ExecutionSpec | None:
    if handler is None:
        return None
    if not (callable(handler) or isinstance(handler, HttpHandler)):
        raise ContractError(f"@tool({name!r}): handler must be a callable or an HttpHandler, "
                            f"not {type(handler).__name__}")
    if timeout_s <= 0 or retries < 0:
        raise ContractError(f"@tool({name!r}): timeout_s must be > 0 and retries >= 0")
    return ExecutionSpec(handler, float(timeout_s), int(retries))


def contract_of(obj: Any) -> Contract | None:
    found = getattr(obj, _ATTR, None) if isinstance(obj, type) else None
    return found if isinstance(found, Contract) and found.model is obj else None


def _violations(exc: ValidationError, schema: dict[str, Any],
                arguments: dict[str, Any]) -> tuple[Violation, ...]:
    by_pointer: dict[str, Violation] = {}
    for err in exc.errors(include_url=False):
        raised = (err.get("ctx") or {}).get("error")
        if isinstance(raised, Violated):
            pointer = f"/{raised.field}" if raised.field else _pointer(err["loc"], schema)
            found = Violation(pointer, raised.code, _at(arguments, pointer), raised.allowed,
                              raised.message, raised.grammar)
        else:
            pointer = _pointer(err["loc"], schema)
            node = _node(schema, pointer)
            found = Violation(pointer, code_for(err["type"]), _at(arguments, pointer),
                              allowed_values(schema, node), _message(err))
        by_pointer.setdefault(pointer, found)  # union branches repeat one problem: keep one
    return tuple(by_pointer.values())


def _message(err: Mapping[str, Any]) -> str:
    msg = str(err["msg"])
    return msg.removeprefix("Value error, ")


def _pointer(loc: tuple[Any, ...], schema: dict[str, Any]) -> str:
    """Pydantic's loc, minus the union-branch labels it inserts, as a JSON Pointer."""
    node, parts = schema, []
    for part in loc:
        node = _resolve(schema, node)
        if isinstance(part, int) and "items" in node:
            parts.append(str(part))
            node = node["items"]
        elif isinstance(part, str) and "properties" in node:  # an object: part is a key,
            parts.append(part.replace("~", "~0").replace("/", "~1"))  # known or not
            node = node["properties"].get(part, {})
        # anything else is a union-branch label: not part of the data's path
    return "".join(f"/{p}" for p in parts)


def _node(schema: dict[str, Any], pointer: str) -> dict[str, Any]:
    node = schema
    for part in [p for p in pointer.split("/") if p]:
        node = _resolve(schema, node)
        node = node["items"] if part.isdigit() and "items" in node else \
            node.get("properties", {}).get(part.replace("~1", "/").replace("~0", "~"), {})
    return _resolve(schema, node)


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref") if isinstance(node, dict) else None
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target: dict[str, Any] = schema.get("$defs", {}).get(ref.removeprefix("#/$defs/"), {})
        return target
    return node


def allowed_values(schema: dict[str, Any], node: dict[str, Any]) -> Any:
    """What a schema node allows, in the terms a repair prompt can use."""
    node = _resolve(schema, node)
    if "enum" in node:
        return list(node["enum"])
    if "const" in node:
        return [node["const"]]
    if "anyOf" in node:
        options = [allowed_values(schema, sub) for sub in node["anyOf"]]
        flat: list[Any] = []
        for option in options:
            flat.extend(option if isinstance(option, list) else [option])
        return flat
    keys = ("type", "format", "pattern", "minimum", "maximum", "exclusiveMinimum",
            "exclusiveMaximum", "minLength", "maxLength", "multipleOf")
    summary = {k: node[k] for k in keys if k in node}
    return copy.deepcopy(summary) or None


def _at(arguments: dict[str, Any], pointer: str) -> Any:
    value: Any = arguments
    for part in [p for p in pointer.split("/") if p]:
        key: Any = int(part) if isinstance(value, list) and part.isdigit() else \
            part.replace("~1", "/").replace("~0", "~")
        try:
            value = value[key]
        except (KeyError, IndexError, TypeError):
            return None
    return value
