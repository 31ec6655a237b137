import datetime as dt
import json
from pathlib import Path
from typing import Annotated

import pytest
from pydantic import BaseModel, Field

from contracts import (
    ContractError,
    ContractRegistry,
    FromHeader,
    Generated,
    MissingRuntimeValue,
    contract_of,
    examples,
    tool,
)

TODAY = dt.date(2026, 11, 29)
SNAPSHOTS = Path(examples.__file__).parent / "snapshots"


@pytest.fixture(scope="module")
def registry():
    reg = ContractRegistry()
    reg.load("contracts.examples")
    return reg


def test_examples_register_eight_contracts(registry):
    assert registry.names() == ["book_hotel", "book_ticket", "check_access_request_status",
                                "create_support_ticket", "open_dispute", "open_urgent_ticket",
                                "reissue_card", "search_products"]


def test_decorator_rejects_non_models():
    with pytest.raises(ContractError, match="not a pydantic BaseModel"):
        tool(name="x", description="d")(dict)


def test_duplicate_names_fail_at_load_time(tmp_path):
    for i in (1, 2):
        (tmp_path / f"m{i}.py").write_text(
            "from pydantic import BaseModel\nfrom contracts import tool\n"
            "@tool(name='same', description='d')\nclass A(BaseModel):\n    x: int\n")
    reg = ContractRegistry()
    reg.load(str(tmp_path / "m1.py"))
    with pytest.raises(ContractError, match="duplicate contract name 'same'"):
        reg.load(str(tmp_path / "m2.py"))


@pytest.mark.parametrize(("target", "says"), [
    ("no.such.module", "cannot import"), ("/no/such/file.py", "does not exist")])
def test_load_errors_are_one_line(target, says):
    with pytest.raises(ContractError, match=says):
        ContractRegistry().load(target)


def test_runtime_fields_are_left_out_of_the_schema(registry):
    ticket = registry.get("create_support_ticket")
    schema = ticket.schema()
    assert set(schema["properties"]) == {"title", "queue", "description"}
    assert "tenant_id" not in schema["required"]
    assert schema["additionalProperties"] is False
    assert set(ticket.runtime) == {"tenant_id", "idempotency_key"}


def test_runtime_values_come_from_headers_or_are_generated(registry):
    ticket = registry.get("create_support_ticket")
    values = ticket.runtime_values({"x-tenant-id": "acme"})
    assert values["tenant_id"] == "acme"
    assert len(values["idempotency_key"]) == 36
    sent = ticket.runtime_values({"X-Tenant-Id": "acme", "Idempotency-Key": "k-1"})
    assert sent["idempotency_key"] == "k-1"
    with pytest.raises(MissingRuntimeValue, match="X-Tenant-Id"):
        ticket.runtime_values({})


def test_caller_may_not_write_runtime_fields(registry):
    ticket = registry.get("create_support_ticket")
    outcome = ticket.validate({"title": "t", "queue": "ops", "description": "d",
                               "tenant_id": "evil"}, runtime={"tenant_id": "acme",
                                                              "idempotency_key": "k"})
    assert not outcome.valid
    assert outcome.violations[0].pointer == "/tenant_id"
    assert outcome.violations[0].code == "unknown_field"


# -- the seed scenarios: dirty input normalized, or explained with the allowed values ------

def test_dirty_dispute_is_normalized(registry):
    outcome = registry.get("open_dispute").validate(
        {"card_last4": "•• 4417", "operation_date": "вчера", "amount": "1 200,50 ₽",
         "reason": "Duplicate", "original_operation_id": "OP-123456"},
        runtime={}, today=TODAY)
    assert outcome.valid, outcome.violations
    assert outcome.arguments == {"card_last4": "4417", "operation_date": "2026-11-28",
                                 "amount": "1200.50", "reason": "duplicate",
                                 "original_operation_id": "OP-123456"}


@pytest.mark.parametrize(("word", "expected"), [
    ("today", "2026-11-29"), ("Yesterday", "2026-11-28"), ("сегодня", "2026-11-29")])
def test_relative_days_resolve_against_the_clock(registry, word, expected):
    outcome = registry.get("open_dispute").validate(
        {"card_last4": "4417", "operation_date": word, "amount": "5", "reason": "fraud"},
        runtime={}, today=TODAY)
    assert outcome.arguments["operation_date"] == expected


def test_duplicate_without_original_is_a_cross_field_violation(registry):
    outcome = registry.get("open_dispute").validate(
        {"card_last4": "4417", "operation_date": "2026-11-01", "amount": "5",
         "reason": "duplicate"}, runtime={}, today=TODAY)
    (v,) = outcome.violations
    assert (v.pointer, v.code, v.observed) == ("/original_operation_id", "cross_field", None)
    assert "OP-123456" in v.allowed


def test_future_date_is_a_semantic_violation(registry):
    outcome = registry.get("open_dispute").validate(
        {"card_last4": "4417", "operation_date": "2027-01-01", "amount": "5",
         "reason": "fraud"}, runtime={}, today=TODAY)
    (v,) = outcome.violations
    assert (v.pointer, v.code) == ("/operation_date", "semantic_mismatch")


def test_unknown_reason_lists_the_allowed_values(registry):
    outcome = registry.get("open_dispute").validate(
        {"card_last4": "4417", "operation_date": "2026-11-01", "amount": "5",
         "reason": "stolen"}, runtime={}, today=TODAY)
    (v,) = outcome.violations
    assert v.code == "invalid_enum" and v.observed == "stolen"
    assert v.allowed == ["duplicate", "fraud", "not_received", "wrong_amount"]
    assert "'fraud'" in v.feedback()


def test_branch_must_belong_to_the_city(registry):
    outcome = registry.get("reissue_card").validate(
        {"card_last4": "4417", "city": "Kazan", "branch_id": 101}, runtime={})
    (v,) = outcome.violations
    assert (v.pointer, v.code, v.observed, v.allowed) == (
        "/branch_id", "semantic_mismatch", 101, examples.BRANCHES["Kazan"])


@pytest.mark.parametrize(("arguments", "pointer", "code"), [
    ({"query": "", "category": "books"}, "/query", "out_of_range"),
    ({"query": "x", "category": "food"}, "/category", "invalid_enum"),
    ({"query": "x", "category": "books", "max_price": -1}, "/max_price", "out_of_range"),
    ({"query": "x", "category": "books", "max_price": "cheap"}, "/max_price", "wrong_type"),
    ({"category": "books"}, "/query", "missing_required"),
    ({"query": "x", "category": "books", "color": "red"}, "/color", "unknown_field"),
])
def test_violation_codes(registry, arguments, pointer, code):
    outcome = registry.get("search_products").validate(arguments, runtime={})
    assert [(v.pointer, v.code) for v in outcome.violations] == [(pointer, code)]


def test_pattern_mismatch_names_the_pattern(registry):
    outcome = registry.get("check_access_request_status").validate(
        {"request_id": "4217"}, runtime={})
    (v,) = outcome.violations
    assert v.code == "pattern_mismatch" and v.allowed["pattern"] == "^AR-[0-9]{6}$"


def test_arguments_must_be_an_object(registry):
    outcome = registry.get("search_products").validate(["x"], runtime={})
    assert outcome.violations[0].code == "wrong_type"


def test_snapshots_match_the_contracts(registry):
    """A contract's schema changed without its snapshot: run `strictcall contracts snapshot`
    and review the diff."""
    for contract in registry:
        path = SNAPSHOTS / f"{contract.name}.json"
        assert path.exists(), f"no snapshot for {contract.name}"
        assert json.loads(path.read_text()) == contract.snapshot(), contract.name


def test_contract_of_ignores_subclasses():
    @tool(name="base", description="d")
    class Base(BaseModel):
        x: Annotated[int, Field(ge=0)]
        tenant: Annotated[str, FromHeader("X-T")]
        key: Annotated[str, Generated()]

    class Child(Base):
        pass

    assert contract_of(Base).name == "base"
    assert contract_of(Child) is None
