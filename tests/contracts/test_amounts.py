"""The example contracts' amount reading (contracts/examples.py `amount_text`): an amount as
people write it, in their locale's grouping and with their currency, becomes the same
number; a sign, an exponent or zero is never silently turned into another amount."""

from __future__ import annotations

from decimal import Decimal

# (the test extra's; the vLLM tier's environment collects this module without it)
import pytest
from babel.numbers import format_currency, format_decimal
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts import contract_of
from contracts.examples import OpenDispute, amount_text

DISPUTE = contract_of(OpenDispute)
AMOUNTS = st.decimals(min_value=Decimal("0.01"), max_value=Decimal("9999999.99"), places=2)
LOCALES = ["en_US", "ru_RU", "de_DE", "fr_FR", "es_ES", "en_GB"]


@settings(max_examples=300, deadline=None)
@given(amount=AMOUNTS, locale=st.sampled_from(LOCALES),
       currency=st.sampled_from(["RUB", "EUR", "USD", None]))
def test_an_amount_written_in_any_locale_reads_as_the_same_number(amount, locale, currency):
    text = format_decimal(amount, format="#,##0.00", locale=locale) if currency is None \
        else format_currency(amount, currency, locale=locale)
    assert Decimal(amount_text(text)) == amount, text


@pytest.mark.parametrize(("written", "read"), [
    ("1 200,50 ₽", "1200.50"), ("1,200.50", "1200.50"), ("€2.300,00", "2300.00"),
    ("1 200 руб.", "1200"), ("89,90", "89.90"), (1200.5, "1200.5"), (1500, "1500"),
    ("12 345 678,00", "12345678.00"), ("1\u00a0200,50 €", "1200.50"),
])
def test_amounts_as_people_write_them(written, read):
    assert amount_text(written) == read


@pytest.mark.parametrize("written", ["5566 89,90 €", "4417 1 200,50", "12 34,00"])
def test_digits_spaced_apart_but_not_in_thousands_are_no_amount(written):
    """A card's digits and an amount side by side ("с карты 5566 89,90 ₽") are two
    numbers: never 556689.90."""
    assert amount_text(written) == written
    ok, _ = DISPUTE.fields.value(("amount",), written, context={})
    assert not ok


@pytest.mark.parametrize("written", ["-5", "−5", "+5", "1.5e3", "2E2", "(120.00)"])
def test_a_sign_or_an_exponent_is_left_for_the_pattern_to_refuse(written):
    assert amount_text(written) == written
    ok, _ = DISPUTE.fields.value(("amount",), written, context={})
    assert not ok


@pytest.mark.parametrize("written", ["0", "0,00", "0.00 ₽", 0])
def test_zero_is_no_amount_of_an_operation(written):
    ok, _ = DISPUTE.fields.value(("amount",), written, context={})
    assert not ok
