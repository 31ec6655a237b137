"""A write whose handler leaves a line in a file (STRICTCALL_TEST_RUNS) each time it starts
and ends, with the process id: the replica tests count how often it ran, over every
replica process, and know when a run is under way."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from contracts import ToolContext, tool


def _note(what: str, context: ToolContext) -> None:
    runs = os.environ.get("STRICTCALL_TEST_RUNS")
    if runs:
        with Path(runs).open("a") as out:  # one short append per line: no interleaving
            out.write(f"{what} {context.idempotency_key} {os.getpid()}\n")


async def _transfer(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    _note("start", context)
    await asyncio.sleep(arguments["hold_s"])
    _note("done", context)
    return {"transfer": f"TR-{context.idempotency_key}", "pid": os.getpid()}


@tool(name="transfer_funds", description="Move money between two accounts.",
      owner="payments", kind="write", risk="high", handler=_transfer, timeout_s=3)
class TransferFunds(BaseModel):
    model_config = ConfigDict(extra="forbid")
    amount: Annotated[int, Field(ge=1, le=1000)]
    hold_s: Annotated[float, Field(ge=0, le=2.5, description="how long the transfer takes")]
