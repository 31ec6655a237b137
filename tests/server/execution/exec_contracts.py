"""Contracts whose handlers do each thing a real integration can do: answer, fail without
acting, hang, crash after acting, do part of the work; and contracts at each point of their
life (deprecated, retired). `LEDGER` counts what the handlers did, so a test can see a
write act once however often it is asked."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from contracts import FromHeader, Generated, HttpHandler, Partial, ToolContext, ToolFailed, tool

LEDGER: Counter[str] = Counter()  # handler name -> times it ran (acted or tried)
FLAKY = {"fail_first": 1}  # lookup_order fails this many times before it answers


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


async def _lookup(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    LEDGER["lookup_order"] += 1
    if context.attempt <= FLAKY["fail_first"]:
        raise ConnectionError("the order service dropped the connection")
    if arguments["order_id"] == "ORD-404":
        raise ToolFailed("there is no order ORD-404")
    return {"order_id": arguments["order_id"], "status": "shipped", "attempt": context.attempt}


async def _hang(arguments: dict[str, Any], context: ToolContext) -> None:
    LEDGER[f"hang_{context.tool}"] += 1
    await asyncio.sleep(3600)


def _refund(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    """Sync on purpose: it runs on a worker thread."""
    LEDGER["refund"] += 1
    if arguments["amount"] > 1000:
        raise ToolFailed("refunds over 1000 need a manager; nothing was refunded")
    return {"refund_id": f"RF-{LEDGER['refund']:04d}", "key": context.idempotency_key}


def _charge(arguments: dict[str, Any], context: ToolContext) -> None:
    LEDGER["charge"] += 1  # the money moved; then the handler crashed
    raise RuntimeError("lost the connection after sending the charge")


def _bulk(arguments: dict[str, Any], context: ToolContext) -> Partial:
    LEDGER["bulk"] += 1
    return Partial({"emailed": arguments["customers"][:1]}, "1 of the customers bounced")


@tool(name="lookup_order", description="Look up an order's shipping status.", owner="orders",
      kind="read", risk="low", handler=_lookup, timeout_s=2, retries=2)
class LookupOrder(_Model):
    order_id: Annotated[str, Field(pattern=r"^ORD-[0-9]{3}$")]


@tool(name="slow_report", description="Build a sales report (slow).", owner="analytics",
      kind="read", risk="low", handler=_hang, timeout_s=0.2, retries=1)
class SlowReport(_Model):
    month: Annotated[int, Field(ge=1, le=12)]


@tool(name="refund_order", description="Refund an order to the customer's card.",
      owner="payments", kind="write", risk="high", handler=_refund, timeout_s=2)
class RefundOrder(_Model):
    order_id: Annotated[str, Field(pattern=r"^ORD-[0-9]{3}$")]
    amount: Annotated[int, Field(ge=1, le=100000)]
    tenant_id: Annotated[str, FromHeader("X-Tenant-Id")]
    idempotency_key: Annotated[str, Generated("uuid4")]


@tool(name="charge_card", description="Charge the customer's card.", owner="payments",
      kind="write", risk="critical", handler=_charge, timeout_s=2)
class ChargeCard(_Model):
    amount: Annotated[int, Field(ge=1, le=100000)]


@tool(name="hang_write", description="Write to a ledger that never answers.",
      owner="payments", kind="write", risk="high", handler=_hang, timeout_s=0.2)
class HangWrite(_Model):
    entry: Annotated[str, Field(max_length=40)]


@tool(name="email_customers", description="Email a list of customers.", owner="crm",
      kind="write", risk="medium", handler=_bulk)
class EmailCustomers(_Model):
    customers: Annotated[list[str], Field(min_length=1, max_length=5)]


@tool(name="old_lookup", description="Look up an order (old API).", owner="orders",
      kind="read", risk="low", lifecycle="deprecated", version="1")
class OldLookup(_Model):
    order_id: Annotated[str, Field(pattern=r"^ORD-[0-9]{3}$")]


@tool(name="ancient_lookup", description="Look up an order (retired API).", owner="orders",
      kind="read", risk="low", lifecycle="retired", version="0")
class AncientLookup(_Model):
    order_id: Annotated[str, Field(pattern=r"^ORD-[0-9]{3}$")]


class Balance(_Model):
    """What get_balance must return."""

    account: Annotated[str, Field(pattern=r"^AC-[0-9]{3}$")]
    balance: int


class Transfer(_Model):
    transfer_id: Annotated[str, Field(pattern=r"^TR-[0-9]{4}$")]


def _balance(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    """A read whose backend answers in another shape (and leaks a secret doing it)."""
    LEDGER["balance"] += 1
    return {"acct": arguments["account"], "balance": "lots", "debug_token": "SECRET-7731"}


def _transfer(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    """A write that acted, then answered something its contract does not know."""
    LEDGER["transfer"] += 1
    return {"ok": True, "internal_ref": "SECRET-8842"}


@tool(name="get_balance", description="Read an account's balance.", owner="payments",
      kind="read", risk="low", handler=_balance, timeout_s=2, retries=0, output=Balance)
class GetBalance(_Model):
    account: Annotated[str, Field(pattern=r"^AC-[0-9]{3}$")]


@tool(name="send_transfer", description="Send money to an account.", owner="payments",
      kind="write", risk="high", handler=_transfer, timeout_s=2, output=Transfer)
class SendTransfer(_Model):
    account: Annotated[str, Field(pattern=r"^AC-[0-9]{3}$")]
    amount: Annotated[int, Field(ge=1, le=1000)]


# A sync write that blocks until the test opens STUCK (a handler stuck on a backend): past
# its time limit its thread runs on.
STUCK = threading.Event()


def _stuck(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    LEDGER["stuck_started"] += 1
    STUCK.wait(30)
    LEDGER["stuck_done"] += 1
    return {"entry": arguments["entry"], "key": context.idempotency_key}


@tool(name="stuck_write", description="Write to a ledger that answers late.", owner="ledger",
      kind="write", risk="high", handler=_stuck, timeout_s=0.2)
class StuckWrite(_Model):
    entry: Annotated[str, Field(max_length=40)]


# Port 9 (discard) on the loopback: nothing listens there, the connection is refused.
@tool(name="notify_partner", description="Tell the partner's system about an order.",
      owner="partners", kind="write", risk="medium",
      handler=HttpHandler("http://127.0.0.1:9/notify"), timeout_s=2)
class NotifyPartner(_Model):
    order_id: Annotated[str, Field(pattern=r"^ORD-[0-9]{3}$")]
