"""What a contract says of its top-level fields beyond their types: which ones must be
copied from the conversation (`Grounded`), the question to ask for a missing one (`Ask`),
which ones repair may never change (`Confirm`); and one field's normalizing: a raw span of
text through the field's own `mode="before"` validators and its type, to the JSON value
the model would write for it."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Annotated, Any, cast

from pydantic import BaseModel, TypeAdapter, ValidationError

from contracts.markers import Ask, Confirm, Grounded


@dataclass(frozen=True)
class FieldRules:
    grounded: tuple[str, ...] = ()
    questions: Mapping[str, str] = field(default_factory=dict)  # Ask, by field
    confirmed: tuple[str, ...] = ()

    @property
    def asked(self) -> tuple[str, ...]:
        """Fields that may be left "not given" (and then are asked for)."""
        return tuple(dict.fromkeys([*self.grounded, *self.questions]))

    def __bool__(self) -> bool:
        return bool(self.grounded or self.questions or self.confirmed)


def field_rules(model: type[BaseModel]) -> FieldRules:
    grounded, questions, confirmed = [], {}, []
    for name, info in model.model_fields.items():
        key = info.alias or name
        for meta in info.metadata:
            if isinstance(meta, Grounded):
                grounded.append(key)
            elif isinstance(meta, Ask):
                questions[key] = meta.question
            elif isinstance(meta, Confirm):
                confirmed.append(key)
    return FieldRules(tuple(grounded), questions, tuple(confirmed))


class FieldValues:
    """One model's fields, each as a function from raw input to its JSON value."""

    def __init__(self, model: type[BaseModel]) -> None:
        self.model = model

    def description(self, name: str) -> str | None:
        info = self.model.model_fields.get(name)
        return info.description if info is not None else None

    def value_of(self, name: str, raw: Any) -> tuple[bool, Any]:
        """(True, the JSON value `raw` stands for) if `raw`, through the field's before
        validators, is a value of the field; (False, None) if not."""
        return self._through(name, raw, after=False, context={})

    def normalized(self, name: str, value: Any, *,
                   context: Mapping[str, Any]) -> tuple[bool, Any]:
        """The field's value as a valid call would hold it: its before validators, its
        type and its after validators (`context`: what they read, such as today's date)."""
        return self._through(name, value, after=True, context=context)

    def _through(self, name: str, raw: Any, *, after: bool,
                 context: Mapping[str, Any]) -> tuple[bool, Any]:
        adapter = self._adapters.get(name)
        if adapter is None:
            return False, None
        value = raw
        try:
            for step in self._steps("before").get(name, ()):
                value = step(value, context)
            value = adapter.validate_python(value)
            for step in self._steps("after").get(name, ()) if after else ():
                value = step(value, context)
            return True, adapter.dump_python(value, mode="json")
        except (ValidationError, ValueError, TypeError, ArithmeticError):
            return False, None

    @cached_property
    def _adapters(self) -> dict[str, TypeAdapter[Any]]:
        # (a field's type with its constraints, as pydantic reads an annotation)
        return {info.alias or name: TypeAdapter(cast(Any, Annotated[info.annotation, info]))
                for name, info in self.model.model_fields.items()}

    def _steps(self, mode: str) -> dict[str, list[Step]]:
        return self._validators[mode]

    @cached_property
    def _validators(self) -> dict[str, dict[str, list[Step]]]:
        """The field validators by mode ("before", "after") and field."""
        out: dict[str, dict[str, list[Step]]] = {"before": {}, "after": {}}
        for decorator in self.model.__pydantic_decorators__.field_validators.values():
            if decorator.info.mode not in out:
                continue  # wrap and plain validators stand for the whole field: not run
            for name in decorator.info.fields:
                out[decorator.info.mode].setdefault(name, []).append(_step(decorator.func))
        return out


Step = Callable[[Any, Mapping[str, Any]], Any]


def _step(func: Callable[..., Any]) -> Step:
    """A field validator (bound to its model) called with a value and a context: one that
    reads its ValidationInfo gets one holding that context and no other fields."""
    if len(inspect.signature(func).parameters) >= 2:
        return lambda value, context: func(value, _Info(context))
    return lambda value, context: func(value)


@dataclass(frozen=True)
class _Info:
    context: Mapping[str, Any]
    data: Mapping[str, Any] = field(default_factory=dict)
    field_name: str | None = None
    mode: str = "python"
