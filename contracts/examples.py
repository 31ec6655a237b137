"""Example contracts, shipped with StrictCall and used by its tests and benchmarks.

    strictcall serve --contracts contracts.examples
"""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from typing import Annotated, Any, Literal

from price_parser import Price
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from contracts import clock
from contracts.catalog import ToolContext, ToolFailed
from contracts.contract import tool
from contracts.date_ranges import on_or_after, on_or_before
from contracts.markers import About, Ask, Confirm, FromHeader, Generated, Grounded, Redact
from contracts.violations import Violated

# Reference data for reissue_card: the branches of each city.
BRANCHES: dict[str, list[int]] = {
    "Moscow": [101, 102, 103, 104],
    "Saint Petersburg": [201, 202, 203],
    "Kazan": [301, 302],
    "Novosibirsk": [401, 402],
}
RELATIVE_DAYS = {"today": 0, "yesterday": 1, "сегодня": 0, "вчера": 1}
RelativeDay = Literal["today", "yesterday", "сегодня", "вчера"]
Reason = Literal["duplicate", "fraud", "not_received", "wrong_amount"]


# The support scenario: check an access request's status; open an urgent ticket only if the
# request is stuck (pending for STUCK_AFTER_DAYS days or more). A small in-memory desk stands
# in for the identity and ticketing systems (`strictcall serve --contracts contracts.examples
# --policy contracts/support_policy.yaml`; README, "The execution layer").
STUCK_AFTER_DAYS = 5
ACCESS_REQUESTS: dict[str, dict[str, Any]] = {
    "AR-004217": {"status": "pending", "waiting_days": 9, "system": "payroll"},
    "AR-004218": {"status": "pending", "waiting_days": 1, "system": "crm"},
    "AR-003990": {"status": "approved", "waiting_days": 0, "system": "wiki"},
}


def is_stuck(request_id: str) -> bool:
    found = ACCESS_REQUESTS.get(request_id)
    return found is not None and found["status"] == "pending" and \
        found["waiting_days"] >= STUCK_AFTER_DAYS


class SupportDesk:
    """The systems behind the support tools: statuses to read, urgent tickets opened."""

    def __init__(self) -> None:
        self.tickets: list[dict[str, Any]] = []

    def status(self, arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        request_id = arguments["request_id"]
        if request_id not in ACCESS_REQUESTS:
            raise ToolFailed(f"there is no access request {request_id!r}")
        return {"request_id": request_id, **ACCESS_REQUESTS[request_id],
                "stuck": is_stuck(request_id)}

    def open_urgent(self, arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        ticket = {"ticket_id": f"URG-{len(self.tickets) + 1:04d}", **arguments,
                  "idempotency_key": context.idempotency_key}
        self.tickets.append(ticket)
        return {"ticket_id": ticket["ticket_id"], "queue": "urgent"}


DESK = SupportDesk()


class _Contract(BaseModel):
    model_config = ConfigDict(extra="forbid")


# A sign, an exponent or brackets: not an amount as people write one on a statement. Left
# as written, for the field's pattern to refuse (a repair or a question follows), never
# read as another number ("-5" is no 5, "1.5e3" no 1.53).
_NOT_AN_AMOUNT = re.compile(r"^\s*[-\u2212+(]|\d[eE][-+]?\d|\)\s*$")
# Digits spaced apart are one number only where the spaces group thousands ("1 200,50"):
# "5566 89,90" is a card and an amount side by side, never 556689.90.
_SPACED = re.compile(r"\d[\d\s\u00a0\u202f]*\d")
_GROUPED = re.compile(r"\d{1,3}(?:[\s\u00a0\u202f]\d{3})+")


def amount_text(value: Any) -> Any:
    """An amount as the contract writes it ("1200.50"), from a number or a text with its
    currency and its locale's digit grouping ("1 200,50 ₽", "1,200.50", "€2.300,00",
    "1 200 руб.": price-parser, the reading the dialogue uses too); anything else as it
    came, for the field's own checks to refuse."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        number = Decimal(str(value))
        return format(number.quantize(Decimal("0.01")).normalize(), "f") \
            if number.is_finite() and number >= 0 else value
    if not isinstance(value, str) or _NOT_AN_AMOUNT.search(value) or any(
            any(c.isspace() for c in run) and not _GROUPED.fullmatch(run)
            for run in _SPACED.findall(value)):
        return value
    amount = Price.fromstring(value).amount
    return format(amount, "f") if amount is not None else value


def _digits(value: Any) -> Any:
    return re.sub(r"\D", "", value) if isinstance(value, str) else value




@tool(name="open_dispute", description="Open a dispute about a card operation the customer "
      "does not recognise or that went wrong.", owner="cards", kind="write", risk="high")
class OpenDispute(_Contract):
    # What the customer must have said is Grounded: the model can only copy it from the
    # conversation, or leave it "not given" and the customer is asked, in their language.
    # Card digits stay out of the audit log (it shows "[redacted]"); the amount is money a
    # person confirms.
    card_last4: Annotated[str, Redact(), Grounded(), About(
        "last four digits of the card", ru="последние четыре цифры карты",
        de="die letzten vier Ziffern der Karte", es="últimos cuatro dígitos de la tarjeta"),
        Ask("What are the last four digits of the card?",
            ru="Назовите, пожалуйста, последние четыре цифры карты.",
            de="Wie lauten die letzten vier Ziffern der Karte?",
            es="¿Cuáles son los últimos cuatro dígitos de la tarjeta?"), Field(
        pattern=r"^[0-9]{4}$", description="Last four digits of the card")]
    operation_date: Annotated[dt.date | RelativeDay, Grounded(), About(
        "date of the operation", ru="дата операции", de="Datum der Buchung",
        es="fecha de la operación"), Ask(
        "On what date was the operation?", ru="Какого числа была операция?",
        de="An welchem Tag war die Buchung?", es="¿En qué fecha fue la operación?"), Field(
        description="Date of the operation: YYYY-MM-DD, or today / yesterday")]
    amount: Annotated[str, Grounded(), Confirm(), About(
        "amount of the operation", ru="сумма операции", de="Betrag der Buchung",
        es="importe de la operación"), Ask(
        "What was the amount of the operation?", ru="Какая была сумма операции?",
        de="Wie hoch war der Betrag?", es="¿Cuál fue el importe de la operación?"), Field(
        pattern=r"^[0-9]{1,9}(\.[0-9]{1,2})?$",
        description="Amount of the operation, e.g. 1200.50")]
    reason: Reason
    original_operation_id: Annotated[str | None, Grounded(), About(
        "id of the original operation", ru="номер первой операции",
        de="Nummer der ursprünglichen Buchung"), Ask(
        "Which of the two charges came first? Please give the id of that original "
        "operation (it looks like OP-123456, on your statement).",
        ru="Какое из двух списаний было первым? Назовите, пожалуйста, номер этой операции "
           "(вида OP-123456, он есть в выписке).",
        de="Welche der beiden Abbuchungen war die erste? Bitte nennen Sie ihre Nummer "
           "(wie OP-123456, auf dem Kontoauszug)."), Field(
        pattern=r"^OP-[0-9]{6}$",
        description="Id of the original operation (OP-123456); required for duplicate")] = None

    @field_validator("card_last4", mode="before")
    @classmethod
    def _last4(cls, value: Any) -> Any:
        digits = _digits(value)  # "•• 4417", "card 4417"
        return digits[-4:] if isinstance(digits, str) and len(digits) >= 4 else value

    @field_validator("amount", mode="before")
    @classmethod
    def _amount(cls, value: Any) -> Any:
        return amount_text(value)

    @field_validator("amount", mode="after")
    @classmethod
    def _positive(cls, value: str) -> str:
        if Decimal(value) <= 0:
            raise ValueError("the amount of an operation is more than 0")
        return value

    @field_validator("reason", mode="before")
    @classmethod
    def _reason(cls, value: Any) -> Any:
        return value.strip().lower().replace(" ", "_") if isinstance(value, str) else value

    @field_validator("operation_date", mode="before")
    @classmethod
    def _word_case(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) and \
            value.strip().lower() in RELATIVE_DAYS else value

    @field_validator("operation_date", mode="after")
    @classmethod
    def _resolve_date(cls, value: dt.date | str, info: ValidationInfo) -> dt.date:
        today = (info.context or {}).get("today") or clock.today()
        day = today - dt.timedelta(days=RELATIVE_DAYS[value]) if isinstance(value, str) \
            else value
        if day > today:
            raise Violated(f"the operation date {day.isoformat()} is in the future",
                           field="operation_date", code="semantic_mismatch",
                           allowed=f"a date on or before {today.isoformat()}",
                           grammar={"type": "string", "pattern": on_or_before(today)})
        return day

    @model_validator(mode="after")
    def _duplicate_needs_original(self) -> OpenDispute:
        if self.reason == "duplicate" and self.original_operation_id is None:
            raise Violated("a 'duplicate' dispute needs the id of the original operation",
                           field="original_operation_id", code="cross_field",
                           allowed="an id like OP-123456, required when reason is 'duplicate'")
        return self


@tool(name="book_hotel", description="Book a hotel room.", owner="travel", kind="write",
      risk="medium")
class BookHotel(_Contract):
    # Two numbers of one type: a message that changes one ("make it 5 nights") must not
    # change the other (server/dialogue/naming.py ties a value to the field it names).
    city: Annotated[str, Grounded(), About("city", ru="город", de="Stadt", es="ciudad"), Field(
        min_length=1, max_length=40, description="City of the hotel")]
    check_in: Annotated[dt.date, Grounded(), About(
        "check-in date", ru="дата заезда", de="Anreisedatum", es="fecha de entrada"), Field(
        description="Check-in date")]
    nights: Annotated[int, Grounded(), About(
        "number of nights", ru="количество ночей", de="Anzahl der Nächte",
        es="número de noches"), Field(
        ge=1, le=30, description="Number of nights")]
    guests: Annotated[int, Grounded(), About(
        "number of guests", ru="количество гостей", de="Anzahl der Gäste",
        es="número de personas"), Field(
        ge=1, le=8, description="Number of guests")]

    @field_validator("check_in", mode="after")
    @classmethod
    def _not_past(cls, value: dt.date, info: ValidationInfo) -> dt.date:
        # (Grounding reads "14.01" said in December as the next 14 January by this rule:
        # of a date's readings, the first the field takes.)
        today = (info.context or {}).get("today") or clock.today()
        if value < today:
            raise Violated(f"the check-in date {value.isoformat()} is in the past",
                           field="check_in", code="semantic_mismatch",
                           allowed=f"a date on or after {today.isoformat()}",
                           grammar={"type": "string", "pattern": on_or_after(today)})
        return value


class Passenger(_Contract):
    full_name: Annotated[str, Grounded(), About(
        "passenger's full name", ru="ФИО пассажира", de="vollständiger Name"), Field(
        min_length=3, max_length=80, description="Full name as in the passport")]
    passport: Annotated[str, Grounded(), About(
        "passport number", ru="номер паспорта", de="Passnummer"), Field(
        pattern=r"^[0-9]{4} ?[0-9]{6}$", description="Passport series and number")]


@tool(name="book_ticket", description="Book train tickets for one or more passengers.",
      owner="travel", kind="write", risk="high")
class BookTicket(_Contract):
    # Grounded fields inside an array's items: each passenger's name and passport are
    # copied from the conversation (a CRM profile in the system message counts).
    train: Annotated[str, Grounded(), Field(pattern=r"^[0-9]{3}[A-ZА-Я]$",
                                            description="Train number, e.g. 752A")]
    passengers: Annotated[list[Passenger], Field(min_length=1, max_length=4)]


@tool(name="create_support_ticket", description="Create a support ticket in a queue.",
      owner="support-platform", kind="write", risk="medium")
class CreateSupportTicket(_Contract):
    title: Annotated[str, Field(min_length=1, max_length=200, description="Short summary")]
    queue: Literal["support", "security", "ops"]
    description: Annotated[str, Field(max_length=4000, description="What happened")]
    tenant_id: Annotated[str, FromHeader("X-Tenant-Id")]
    idempotency_key: Annotated[str, Generated("uuid4", header="Idempotency-Key")]


class AccessRequestStatus(_Contract):
    """What check_access_request_status returns (its result is checked against this)."""

    request_id: str
    status: Literal["pending", "approved", "rejected"]
    waiting_days: Annotated[int, Field(ge=0)]
    system: str
    stuck: bool


class UrgentTicket(_Contract):
    """What open_urgent_ticket returns."""

    ticket_id: Annotated[str, Field(pattern=r"^URG-[0-9]{4}$")]
    queue: Literal["urgent"]


@tool(name="check_access_request_status",
      description="Read the status of an access request. Changes nothing.",
      owner="identity-team", kind="read", risk="low", handler=DESK.status,
      timeout_s=5, output=AccessRequestStatus)
class CheckAccessRequestStatus(_Contract):
    # An id the user (or an earlier tool result) gave: copied, never made up.
    request_id: Annotated[str, Grounded(), Field(pattern=r"^AR-[0-9]{6}$",
                                                 description="Access request id, e.g. AR-004217")]


@tool(name="search_products", description="Search the product catalogue.", owner="commerce",
      kind="read", risk="low")
class SearchProducts(_Contract):
    query: Annotated[str, Field(min_length=1, max_length=100, description="Search words")]
    category: Literal["electronics", "books", "clothing", "home", "toys"]
    max_price: Annotated[float | None, Field(ge=0, description="Highest price, if any")] = None


@tool(name="reissue_card", description="Reissue a card for pickup at a bank branch.",
      owner="cards", kind="write", risk="high")
class ReissueCard(_Contract):
    card_last4: Annotated[str, Field(pattern=r"^[0-9]{4}$",
                                     description="Last four digits of the card")]
    city: Literal["Moscow", "Saint Petersburg", "Kazan", "Novosibirsk"]
    # Branch numbers have three digits: the grammar writes no other (an unbounded integer
    # let a greedy model loop in digits until the runaway guard cut the call).
    branch_id: Annotated[int, Field(ge=100, le=999,
                                    description="Branch for pickup; must be in the city")]

    @field_validator("card_last4", mode="before")
    @classmethod
    def _last4(cls, value: Any) -> Any:
        digits = _digits(value)
        return digits[-4:] if isinstance(digits, str) and len(digits) >= 4 else value

    @model_validator(mode="after")
    def _branch_in_city(self) -> ReissueCard:
        if self.branch_id not in BRANCHES[self.city]:
            raise Violated(f"branch {self.branch_id} is not in {self.city}",
                           field="branch_id", code="semantic_mismatch",
                           allowed=BRANCHES[self.city])
        return self


@tool(name="open_urgent_ticket",
      description="Open an urgent support ticket for an access request that is stuck "
      "(pending for days). Check the request's status first.",
      owner="support-platform", kind="write", risk="high", version="2",
      handler=DESK.open_urgent, timeout_s=5, output=UrgentTicket)
class OpenUrgentTicket(_Contract):
    request_id: Annotated[str, Grounded(), Field(
        pattern=r"^AR-[0-9]{6}$", description="The stuck access request, e.g. AR-004217")]
    summary: Annotated[str, Field(min_length=1, max_length=200,
                                  description="What the requester is blocked on")]
    tenant_id: Annotated[str, FromHeader("X-Tenant-Id")]
    idempotency_key: Annotated[str, Generated("uuid4", header="Idempotency-Key")]

    @model_validator(mode="after")
    def _only_if_stuck(self) -> OpenUrgentTicket:
        if not is_stuck(self.request_id):
            raise Violated(f"access request {self.request_id} is not stuck (pending for "
                           f"{STUCK_AFTER_DAYS}+ days); an urgent ticket is only for those",
                           field="request_id", code="semantic_mismatch",
                           allowed="the id of an access request pending for "
                           f"{STUCK_AFTER_DAYS} days or more")
        return self
