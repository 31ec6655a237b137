"""One field, at any depth, as pydantic itself validates it: the field's own validators in
pydantic's order (checked against validating the whole model), nested models and array
items reached by path, and the markers written into the schema."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

import pytest
from pydantic import AfterValidator, BaseModel, BeforeValidator, Field, field_validator

from contracts import ITEM, About, Ask, FieldValues, Grounded, contract_of
from contracts.examples import BookTicket, OpenDispute


def _tag(tag: str):
    return lambda v: f"{v}{tag}" if isinstance(v, str) else v


class Ordered(BaseModel):
    """Annotated validators and decorator validators of both modes, twice each: pydantic
    runs before-validators last-first and after-validators first-last."""

    x: Annotated[str, BeforeValidator(_tag("<b1")), AfterValidator(_tag(">a1")),
                 BeforeValidator(_tag("<b2")), Field(max_length=40)]
    y: int = 0

    @field_validator("x", mode="before")
    @classmethod
    def _first(cls, v: Any) -> Any:
        return f"{v}<d1" if isinstance(v, str) else v

    @field_validator("x", mode="before")
    @classmethod
    def _second(cls, v: Any) -> Any:
        return f"{v}<d2" if isinstance(v, str) else v

    @field_validator("x", mode="after")
    @classmethod
    def _after(cls, v: str) -> str:
        return f"{v}>d3"


@pytest.mark.parametrize("raw", ["v", "", "w" * 30])
def test_a_fields_value_is_pydantics_own(raw):
    ok, value = FieldValues(Ordered).value(("x",), raw, context={})
    try:
        expected = Ordered.model_validate({"x": raw}).x
    except ValueError:
        assert not ok
        return
    assert ok and value == expected


def test_nested_and_array_item_fields_are_reached_by_path():
    fields = contract_of(BookTicket).fields
    assert fields.value(("passengers", ITEM, "passport"), "4510 123456", context={}) == \
        (True, "4510 123456")
    assert fields.value(("passengers", ITEM, "passport"), "45101", context={}) == (False, None)
    assert fields.value(("passengers", ITEM, "nope"), "x", context={}) == (False, None)
    assert fields.description(("passengers", ITEM, "full_name")) == \
        "Full name as in the passport"


def test_the_seeds_date_field_reads_through_its_own_validators():
    fields = contract_of(OpenDispute).fields
    today = {"today": dt.date(2026, 12, 2)}
    assert fields.value(("operation_date",), "вчера", context=today) == (True, "2026-12-01")
    assert fields.value(("operation_date",), "2026-12-09", context=today) == (False, None)
    assert fields.value(("amount",), "1 200,50 ₽", context=today) == (True, "1200.50")


def test_markers_write_themselves_into_the_schema():
    class Form(BaseModel):
        city: Annotated[str, Grounded(), About("city", ru="город"),
                        Ask("Which city?", ru="Какой город?")]

    node = Form.model_json_schema()["properties"]["city"]
    assert node["x-strictcall-grounded"] is True
    assert node["x-strictcall-about"] == {"en": "city", "ru": "город"}
    assert node["x-strictcall-ask"] == {"en": "Which city?", "ru": "Какой город?"}
    with pytest.raises(ValueError, match="'ru' text must be a non-empty string"):
        Ask("Which?", ru=" ")
