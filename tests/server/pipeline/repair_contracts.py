"""Contracts whose rules repair must not answer by writing a value: an optional field, not
marked, that a rule needs, and a rule that names no field."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from contracts import Violated, tool


@tool(name="send_transfer", description="Send money to a saved payee.")
class SendTransfer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    payee: Literal["landlord", "mother", "gym"]
    amount: Annotated[int, Field(ge=1, le=100000)]
    note: Annotated[str | None, Field(max_length=60,
                                      description="Why the money is sent")] = None

    @model_validator(mode="after")
    def _large_needs_a_note(self) -> SendTransfer:
        if self.amount > 1000 and self.note is None:
            raise Violated("a transfer above 1000 needs a note saying what it is for",
                           field="note", code="cross_field", allowed="a short note")
        return self


@tool(name="weekend_only", description="Book something that only happens at weekends.")
class WeekendOnly(BaseModel):
    model_config = ConfigDict(extra="forbid")

    day: Literal["monday", "saturday"]
    hours: Annotated[int, Field(ge=1, le=8)]

    @model_validator(mode="after")
    def _whole(self) -> WeekendOnly:
        if self.day == "monday":
            raise ValueError("this only happens at weekends")  # names no field
        return self
