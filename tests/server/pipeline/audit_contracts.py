"""A contract with a redacted field whose validator quotes the value it refuses: what the
audit log must hide wherever it would show (arguments, violations, messages)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from contracts import FromHeader, Redact, Violated, tool


@tool(name="pay_invoice", description="Pay an invoice from the customer's account.")
class PayInvoice(BaseModel):
    model_config = ConfigDict(extra="forbid")

    invoice: Annotated[str, Field(pattern=r"^INV-[0-9]{4}$")]
    iban: Annotated[str, Redact(), Field(min_length=8, max_length=34)]
    amount: Annotated[int, Field(ge=1)]
    tenant_id: Annotated[str, FromHeader("X-Tenant-Id")]

    @field_validator("iban")
    @classmethod
    def _german(cls, value: str) -> str:
        if not value.startswith("DE"):
            raise Violated(f"{value} is not a German IBAN; pay from the DE account",
                           field="iban")
        return value
