"""Writes whose handlers leave a line in a file (STRICTCALL_TEST_RUNS) each time they start
and end, with the process id: the replica and fault tests count how often each ran, over
every replica process, and know when a run is under way. And a write to a partner's HTTP
endpoint whose port a test opens and closes."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from contracts import HttpHandler, ToolContext, tool


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


def _post_entry(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    """Sync on purpose (a blocking client library): it runs on a thread of its owner's
    pool, and past its time limit holds that thread until it ends."""
    _note("start", context)
    time.sleep(arguments["hold_s"])
    _note("done", context)
    return {"entry": f"LE-{context.idempotency_key}", "pid": os.getpid()}


@tool(name="post_ledger_entry", description="Post an entry to the ledger.", owner="ledger",
      kind="write", risk="medium", handler=_post_entry, timeout_s=1)
class PostLedgerEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    hold_s: Annotated[float, Field(ge=0, le=30, description="how long the ledger takes")]


# A partner's HTTP endpoint on the loopback (STRICTCALL_TEST_PARTNER_PORT): closed until a
# test opens it.
PARTNER = f"http://127.0.0.1:{os.environ.get('STRICTCALL_TEST_PARTNER_PORT', '9')}/notify"


@tool(name="notify_partner", description="Tell the partner's system about an order.",
      owner="partners", kind="write", risk="medium", handler=HttpHandler(PARTNER), timeout_s=5)
class NotifyPartner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    order_id: Annotated[str, Field(pattern=r"^ORD-[0-9]{3}$")]
