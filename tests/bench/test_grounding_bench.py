"""`strictcall-bench grounding`'s scoring, on answers written by hand: each measure is what
it says (judged by the dialogue's hand-written values, never by the server's own
grounding), the summary counts per language and per field, and the shipped dialogues load
with their relative dates made concrete."""

from __future__ import annotations

import datetime as dt

from bench.dialogue.grounding import load, outcome, summarize
from contracts import clock
from server.eval.judge import judge_fields

GOLD = {"card_last4": "4417", "amount": "1200.50", "original_operation_id": None}


def _judge(shown, asked=(), confirming=(), before=({}, {})):
    return judge_fields(GOLD, shown, asked=set(asked), confirming=set(confirming),
                        before_gold=before[0], before_shown=before[1])


def test_each_measure():
    call = {"card_last4": "4417", "amount": "4417", "original_operation_id": "OP-123456"}
    assert _judge(call) == {"card_last4": "correct", "amount": "wrong",
                            "original_operation_id": "invented"}
    asked = _judge({"card_last4": "4417"}, asked={"amount", "original_operation_id"})
    assert asked == {"card_last4": "correct", "amount": "asked_given",
                     "original_operation_id": "asked_missing"}
    assert _judge({"card_last4": "4417", "amount": "1200.50"})[
        "original_operation_id"] == "not_shown"
    moved = _judge({"card_last4": "4417", "amount": "1300.00"},
                   before=(GOLD, {"card_last4": "4417", "amount": "1200.50"}))
    assert moved["amount"] == "changed"  # the user changed nothing
    confirming = _judge({}, confirming={"amount"}, before=({**GOLD, "amount": "99"}, {}))
    assert confirming["amount"] == "confirming"  # the user did change it


def test_answers_read_as_calls_or_questions():
    call = {"choices": [{"message": {"tool_calls": [{"function": {
        "arguments": '{"card_last4":"4417"}'}}]}}]}
    assert outcome(call) == ({"card_last4": "4417"}, set(), set())
    question = {"choices": [{"message": {"content": "Which?"}}], "strictcall": {
        "needs_input": {"missing": [{"field": "/original_operation_id"}],
                        "confirm": [{"field": "/amount"}],
                        "collected": {"amount": "1200.50"}}}}
    assert outcome(question) == ({"amount": "1200.50"}, {"original_operation_id"},
                                 {"amount"})


def test_summary_counts_per_setting_language_and_field():
    samples = [
        {"setting": "grounding-on", "language": "ru", "seconds": 1.0,
         "scores": {"amount": "correct"}},
        {"setting": "grounding-on", "language": "en", "seconds": 3.0,
         "scores": {"amount": "invented"}},
        {"setting": "grounding-off", "language": "ru", "seconds": 2.0,
         "scores": {"amount": "invented"}}]
    rows, latency = summarize(samples)
    on = next(r for r in rows if r["setting"] == "grounding-on" and r["by"] == "field")
    assert (on["answers"], on["correct"], on["invented"]) == (2, 1, 1)
    ru = next(r for r in rows if r["setting"] == "grounding-on" and r["group"] == "ru")
    assert (ru["answers"], ru["correct"]) == (1, 1)
    assert latency == {"grounding-on": 2.0, "grounding-off": 2.0}


def test_shipped_dialogues_load_in_four_languages():
    dialogues = load()
    assert len(dialogues) >= 28
    assert {d["language"] for d in dialogues} == {"en", "ru", "de", "es"}
    assert {d["tool"] for d in dialogues} == {"open_dispute", "check_access_request_status",
                                              "book_hotel"}
    yesterday = (clock.today() - dt.timedelta(days=1)).isoformat()
    assert dialogues[0]["steps"][0]["expect"]["operation_date"] == yesterday
    hotel = next(d for d in dialogues if d["id"] == "en-hotel-one-of-two-numbers")
    assert [s["expect"]["nights"] for s in hotel["steps"]] == [2, 5]
    assert any(v is None for d in dialogues for s in d["steps"]
               for v in s["expect"].values())  # never given


def test_a_day_of_the_month_alone_is_the_latest_such_day_not_in_the_future(monkeypatch):
    from server.eval.judge import dated

    monkeypatch.setenv(clock.ENV, "2026-12-07")
    assert (dated("{day:3}"), dated("{day:7}"), dated("{day:31}")) == (
        "2026-12-03", "2026-12-07", "2026-10-31")
    monkeypatch.setenv(clock.ENV, "2027-01-02")
    assert dated("{day:3}") == "2026-12-03"
