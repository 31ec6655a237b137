"""`strictcall-bench grounding`'s scoring, on answers written by hand: each measure is
what it says, and the shipped dialogues load with their relative dates made concrete."""

from __future__ import annotations

import datetime as dt

from bench.grounding import load, outcome, score, summarize

EXPECT = {"card_last4": "4417", "amount": "1200.50", "original_operation_id": None}
SAID = {"card_last4": {"4417"}, "amount": {"4417", "1200.50"}}


def present(name, value):
    return str(value) in SAID.get(name, set())


def test_each_measure():
    call = {"card_last4": "4417", "amount": "4417", "original_operation_id": "OP-123456"}
    assert score(EXPECT, call, set(), present) == {
        "card_last4": "correct", "amount": "wrong_present", "original_operation_id": "invented"}
    asked = score(EXPECT, {"card_last4": "4417"}, {"amount", "original_operation_id"}, present)
    assert asked == {"card_last4": "correct", "amount": "asked_present",
                     "original_operation_id": "asked_missing"}
    assert score(EXPECT, {"card_last4": "4417", "amount": "1200.50"}, set(), present)[
        "original_operation_id"] == "left_out"


def test_answers_read_as_calls_or_questions():
    call = {"choices": [{"message": {"tool_calls": [{"function": {
        "arguments": '{"card_last4":"4417"}'}}]}}]}
    assert outcome(call) == ({"card_last4": "4417"}, set())
    question = {"choices": [{"message": {"content": "Which?"}}], "strictcall": {
        "needs_input": {"missing": [{"field": "/original_operation_id"}],
                        "collected": {"amount": "1200.50"}}}}
    assert outcome(question) == ({"amount": "1200.50"}, {"original_operation_id"})


def test_summary_counts_per_setting_and_field():
    samples = [{"setting": "grounding-on", "seconds": 1.0, "scores": {"amount": "correct"}},
               {"setting": "grounding-on", "seconds": 3.0, "scores": {"amount": "invented"}},
               {"setting": "grounding-off", "seconds": 2.0, "scores": {"amount": "invented"}}]
    rows, latency = summarize(samples)
    on = next(r for r in rows if r["setting"] == "grounding-on")
    assert (on["answers"], on["correct"], on["invented"]) == (2, 1, 1)
    assert latency == {"grounding-on": 2.0, "grounding-off": 2.0}


def test_shipped_dialogues_load():
    dialogues = load(today=dt.date(2026, 12, 1))
    assert len(dialogues) >= 20
    assert {d["tool"] for d in dialogues} == {"open_dispute", "check_access_request_status"}
    first = dialogues[0]
    assert first["expect"]["operation_date"] == "2026-11-30"
    assert any(v is None for d in dialogues for v in d["expect"].values())  # never given
