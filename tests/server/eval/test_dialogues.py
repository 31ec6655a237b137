"""`strictcall eval` dialogues: the shipped ones load; run against the scripted app over
the Responses API, the dispute dialogue scores every turn and its measures; against a
naive server (no slots) the same measures catch a value lost to an overwrite, a silent
change and a question asked by a field's bare name."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from contracts import clock
from server.eval.dialogues import run_dialogues
from server.eval.report import dialogue_markdown, summarize_dialogues, summarize_gold
from server.eval.runner import Params
from server.eval.scenarios import ScenarioFile, load
from tests.server.pipeline.test_slots import KNOWN, NOV_30, dispute

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = sorted((ROOT / "contracts" / "scenarios").glob("*.yaml"))
YESTERDAY = (clock.today() - dt.timedelta(days=1)).isoformat()


def test_every_shipped_file_has_a_dialogue_in_three_languages_with_gold_values():
    specs = {load(p).tool: load(p) for p in SHIPPED}
    assert all(spec.dialogues for spec in specs.values())
    for tool in ("open_dispute", "book_hotel"):
        dialogues = specs[tool].dialogues
        assert {d.language for d in dialogues} == {"en", "ru", "de"}
        assert all(t.gold is not None for d in dialogues for t in d.turns)
    first = specs["open_dispute"].dialogues[0]
    assert [t.expect.kind for t in first.turns] == [
        "question", "confirm", "question", "call", "call"]
    assert first.turns[3].tool_result is not None
    assert first.turns[3].tool_result.output.startswith("{")  # compact JSON


def _dispute_script(prompt: str) -> str:
    """The scripted model's reply to the newest message of the dispute dialogue."""
    newest = prompt.split("<|im_start|>")[-2]
    corrected = {**KNOWN, "amount": "1300.00"}
    if "one more" in newest:
        return dispute(card_last4="4417", operation_date=NOV_30, amount="89.90",
                       reason="fraud")
    if "OP-204518" in newest:
        return dispute(**corrected, original_operation_id="OP-204518")
    if "1 300,00" in newest or "\nyes<|im_end|>" in newest:
        return dispute(**corrected)
    return dispute(**KNOWN)


def test_the_dispute_dialogue_against_the_scripted_server(scripted, tmp_path):
    spec = load(ROOT / "contracts" / "scenarios" / "open_dispute.yaml")
    only = spec.model_copy(update={"dialogues": spec.dialogues[:1]})
    with scripted(_dispute_script, contracts=["contracts.examples"],
                  state_url="memory://") as app:
        client = TestClient(app.app, base_url="http://testserver/v1")
        (outcome,) = run_dialogues(client, only, Params("scripted"), {})
    assert [(t.expected, t.got, t.passed) for t in outcome.turns] == [
        ("question", "question", True), ("confirm", "confirm", True),
        ("question", "question", True), ("call", "call", True), ("call", "call", True)]
    assert outcome.turns_to_call == 4 and outcome.lost == [] and outcome.silent == []
    assert outcome.questions == outcome.by_meaning == 3
    summary = summarize_dialogues([outcome])["open_dispute"]
    assert summary["turns_passed"] == 5 and summary["dialogues_passed"] == 1
    assert "| open_dispute | 1/1 | 5/5 | 4 | 3 (3) | 0 | 0 | 0 |" in dialogue_markdown(
        summarize_dialogues([outcome]))
    assert [t.gold["amount"] for t in outcome.turns] == [
        "correct", "confirming", "correct", "correct", "correct"]
    assert [t.gold["original_operation_id"] for t in outcome.turns] == [
        "asked_missing", "not_shown", "asked_missing", "correct", "not_shown"]
    gold = summarize_gold([outcome])["en"]
    assert gold["invented"] == gold["wrong"] == gold["changed"] == gold["asked_given"] == 0
    assert "4417" not in json.dumps(outcome.to_json())  # the user's words are not kept


NAIVE = {"open_dispute": {"type": "function", "function": {
    "name": "open_dispute", "parameters": {"type": "object", "properties": {
        "card_last4": {"type": "string"}, "amount": {"type": "string"},
        "original_operation_id": {"type": "string"}}}}}}


def _naive_server() -> httpx.MockTransport:
    """A stateless server that forgets the card, changes the amount unasked and asks for
    a field by its identifier."""
    answers = iter([
        {"tool_calls": [("open_dispute", {"card_last4": "4417", "amount": "1200.50"})]},
        {"content": "Please provide original_operation_id."},
        {"tool_calls": [("open_dispute", {"card_last4": None, "amount": "1200.50"})]},
        {"tool_calls": [("open_dispute", {"card_last4": "4417", "amount": "999.00"})]}])

    def reply(request: httpx.Request) -> httpx.Response:
        said = next(answers)
        calls = [{"id": f"c{i}", "type": "function", "function": {
            "name": n, "arguments": json.dumps(a)}} for i, (n, a) in
            enumerate(said.get("tool_calls", ()))]
        message = {"role": "assistant", "content": said.get("content"),
                   "tool_calls": calls or None}
        return httpx.Response(200, json={"choices": [{"message": message}]})
    return httpx.MockTransport(reply)


def test_a_naive_server_loses_values_and_changes_them_silently():
    spec = ScenarioFile.model_validate({
        "tool": "open_dispute", "class": "write", "tools": ["open_dispute"],
        "scenarios": [{"id": "x", "kind": "positive", "user": "u", "expect": {"tool": None}}],
        "dialogues": [{"id": "naive", "api": "chat", "turns": [
            {"user": f"turn {n}", "expect": {"call": {"card_last4": "4417"}}}
            for n in range(4)]}]})
    with httpx.Client(transport=_naive_server(), base_url="http://naive/v1") as client:
        (outcome,) = run_dialogues(client, spec, Params("m"), NAIVE)
    assert outcome.lost == ["turn 3: /card_last4"]
    assert outcome.silent == ["turn 4: /amount 1200.50 -> 999.00"]
    assert outcome.questions == 1 and outcome.by_meaning == 0
    assert outcome.turns[1].named == ["original_operation_id"]
    assert [t.passed for t in outcome.turns] == [True, False, False, True]


@pytest.mark.parametrize("turn,says", [
    ({"expect": {"question": ["a"]}}, "user text, a tool_result"),
    ({"user": "u", "expect": {"question": ["a"], "call": {"a": 1}}}, "exactly one"),
])
def test_a_bad_turn_is_refused_by_name(turn, says):
    with pytest.raises(ValueError, match=says):
        ScenarioFile.model_validate({
            "tool": "t", "class": "read", "tools": ["t"],
            "scenarios": [{"id": "x", "kind": "positive", "user": "u",
                           "expect": {"tool": None}}],
            "dialogues": [{"id": "d", "turns": [turn]}]})
