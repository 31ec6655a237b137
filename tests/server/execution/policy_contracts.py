"""A contract whose grammar depends on the server's grammar policy and backend: an
unanchored pattern (--patterns) and a format outlines-core's masks do not write (ipv4)."""

from __future__ import annotations

from ipaddress import IPv4Address
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from contracts import Violated, tool


@tool(name="register_device", description="Register a device on the office network.")
class RegisterDevice(BaseModel):
    model_config = ConfigDict(extra="forbid")

    address: IPv4Address
    serial: Annotated[str, Field(pattern=r"[A-Z]{3}-[0-9]+", max_length=40)]

    @field_validator("address")
    @classmethod
    def _private(cls, value: IPv4Address) -> IPv4Address:
        if not value.is_private:
            raise Violated(f"{value} is not an office address; use a private one "
                           "(10.x.x.x or 192.168.x.x)", field="address")
        return value

    @field_validator("serial")
    @classmethod
    def _not_a_placeholder(cls, value: str) -> str:
        if "XXX-" in value:
            raise Violated("the serial is a placeholder; write the one on the label",
                           field="serial")
        return value
