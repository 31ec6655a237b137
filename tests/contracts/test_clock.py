"""contracts.clock: the host's date, or the one STRICTCALL_TODAY fixes, and what a contract
validates against when no request states a date."""

from __future__ import annotations

import datetime as dt

import pytest

from contracts import clock, contract_of
from contracts.examples import OpenDispute


def test_the_host_date_unless_fixed(monkeypatch):
    monkeypatch.delenv(clock.ENV, raising=False)
    assert clock.today() == dt.date.today()
    monkeypatch.setenv(clock.ENV, "2031-02-28")
    assert clock.today() == dt.date(2031, 2, 28)
    clock.check()
    monkeypatch.setenv(clock.ENV, " ")  # blank is unset
    assert clock.today() == dt.date.today()


def test_a_fixed_date_that_is_no_date_says_how_to_write_it(monkeypatch):
    monkeypatch.setenv(clock.ENV, "02.12.2026")
    with pytest.raises(ValueError, match=r"STRICTCALL_TODAY='02.12.2026' is not a date: "
                                         r"write it as YYYY-MM-DD"):
        clock.check()


def test_contracts_read_yesterday_against_the_fixed_date(monkeypatch):
    monkeypatch.setenv(clock.ENV, "2031-03-01")
    contract = contract_of(OpenDispute)
    outcome = contract.validate({"card_last4": "4417", "operation_date": "yesterday",
                                 "amount": "1200.50", "reason": "fraud"}, runtime={})
    assert outcome.violations == ()
    assert outcome.arguments["operation_date"] == "2031-02-28"  # a leap year's March 1st
