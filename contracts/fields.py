"""One field of a contract, at any depth, as pydantic validates it: a raw value (a span of
text a person wrote, or a value read from it) through the field's own type, constraints and
field validators, in pydantic's own order, to the JSON value a valid call holds.

Nothing of pydantic's rules is copied here: each field becomes a `TypeAdapter` of its
annotation with the field's metadata and its model's `@field_validator`s appended as
`BeforeValidator`/`AfterValidator`/... annotations, which is how pydantic itself builds a
model field's validator. Model validators (cross-field rules) are not run: one field is
checked on its own. A validator that reads other fields (`info.data`) sees none, and the
value is not taken."""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import Annotated, Any, Union, cast

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    PlainValidator,
    TypeAdapter,
    ValidationError,
    WrapValidator,
)
from pydantic.fields import FieldInfo

ITEM = "*"  # a path step into an array's items
Path = tuple[str, ...]  # JSON keys (aliases) from the arguments' root; ITEM for array items

_MODES: dict[str, Any] = {"before": BeforeValidator, "after": AfterValidator,
                          "wrap": WrapValidator, "plain": PlainValidator}


class FieldValues:
    """One model's fields, nested ones included, each as a function from a raw value to
    its JSON value."""

    def __init__(self, model: type[BaseModel]) -> None:
        self.model = model
        self._cache: dict[Path, TypeAdapter[Any] | None] = {}

    def value(self, path: Sequence[str], raw: Any, *,
              context: Mapping[str, Any]) -> tuple[bool, Any]:
        """(True, the JSON value) when `raw` is a value of the field at `path` as pydantic
        validates it (`context`: what its validators read, such as today's date);
        (False, None) when it is not, or when no field is there."""
        adapter = self._adapter(tuple(path))
        if adapter is None:
            return False, None
        try:
            value = adapter.validate_python(raw, context=dict(context))
            return True, adapter.dump_python(value, mode="json")
        except (ValidationError, ValueError, TypeError, ArithmeticError, AttributeError,
                KeyError):
            return False, None

    def description(self, path: Sequence[str]) -> str | None:
        found = self._field(tuple(path))
        return found[1].description if found is not None else None

    def _adapter(self, path: Path) -> TypeAdapter[Any] | None:
        if path not in self._cache:
            found = self._field(path)
            self._cache[path] = None if found is None else _adapter_of(*found)
        return self._cache[path]

    def _field(self, path: Path) -> tuple[type[BaseModel], FieldInfo, str] | None:
        """(the model that holds the field, its FieldInfo, its attribute name)."""
        model: type[BaseModel] | None = self.model
        steps = [p for p in path if p != ITEM]
        for i, key in enumerate(steps):
            if model is None:
                return None
            named = self._by_alias(model).get(key)
            if named is None:
                return None
            name, info = named
            if i == len(steps) - 1:
                return model, info, name
            model = _model_in(info.annotation)
        return None

    @staticmethod
    def _by_alias(model: type[BaseModel]) -> dict[str, tuple[str, FieldInfo]]:
        return {info.alias or name: (name, info) for name, info in model.model_fields.items()}

    @cached_property
    def top_level(self) -> tuple[str, ...]:
        return tuple(self._by_alias(self.model))


def _adapter_of(model: type[BaseModel], info: FieldInfo, name: str) -> TypeAdapter[Any]:
    validators = [_MODES[d.info.mode](d.func)
                  for d in model.__pydantic_decorators__.field_validators.values()
                  if name in d.info.fields or "*" in d.info.fields]
    extras = (*info.metadata, *validators)
    if not extras:
        return TypeAdapter(cast(Any, info.annotation))
    return TypeAdapter(cast(Any, Annotated[(info.annotation, *extras)]))


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model a field's value is, or holds (through Optional, unions with None, lists,
    tuples and Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _model_in(typing.get_args(annotation)[0])
    if origin in (Union, types.UnionType, list, tuple, set, frozenset, Sequence):
        found = [m for a in typing.get_args(annotation) if (m := _model_in(a)) is not None]
        return found[0] if len(found) == 1 else None
    return None
