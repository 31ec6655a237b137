"""`strictcall eval`: scenario files, scoring, the baseline gate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from server.eval.report import compare, summarize
from server.eval.runner import score
from server.eval.scenarios import ScenarioError, load

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = sorted((ROOT / "contracts" / "scenarios").glob("*.yaml"))


def test_shipped_scenarios_load_and_name_registered_tools():
    from server.wiring import load_contracts

    names = set(load_contracts(["contracts.examples"]).names())
    assert len(SHIPPED) == 6
    for path in SHIPPED:
        spec = load(path)
        assert spec.tool in names and set(spec.tools) <= names
        kinds = {case.kind for case in spec.scenarios}
        assert {"positive", "negative"} <= kinds


def test_a_bad_file_names_the_file_and_the_field(tmp_path):
    bad = tmp_path / "s.yaml"
    bad.write_text("tool: x\nclass: maybe\ntools: [x]\nscenarios: []\n")
    with pytest.raises(ScenarioError, match=r"s\.yaml: class"):
        load(bad)
    broken = tmp_path / "b.yaml"
    broken.write_text("tool: [x\n")
    with pytest.raises(ScenarioError, match="not valid YAML"):
        load(broken)


def test_jsonl_files_repeat_the_file_keys(tmp_path):
    path = tmp_path / "s.jsonl"
    rows = [{"tool": "t", "class": "read", "tools": ["t"], "id": f"c{i}", "kind": "positive",
             "user": "u", "expect": {"tool": "t"}} for i in range(2)]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    assert [c.id for c in load(path).scenarios] == ["c0", "c1"]


@pytest.fixture()
def spec():
    return load(ROOT / "contracts" / "scenarios" / "search_products.yaml")


def test_scoring(spec):
    positive, negative = spec.scenarios[0], spec.scenarios[-1]
    good = score(spec, positive, [("search_products", {"query": "lego", "category": "Toys"})])
    assert good.correct and good.tool_name_correct and not good.field_errors
    wrong = score(spec, positive, [("search_products", {"category": "books"})])
    assert not wrong.correct and wrong.tool_name_correct
    assert wrong.field_errors == ["/category", "/query"]
    other = score(spec, positive, [("check_access_request_status", {"request_id": "x"})])
    assert not other.tool_name_correct
    unneeded = score(spec, negative, [("search_products", {"query": "hi"})])
    assert unneeded.unneeded_call and not unneeded.correct
    quiet = score(spec, negative, [])
    assert quiet.correct and positive.user not in json.dumps(quiet.to_json())


def test_the_gate_compares_classes_with_their_thresholds(spec):
    case = spec.scenarios[0]
    ok = score(spec, case, [("search_products", {"query": "lego", "category": "toys"})])
    bad = score(spec, case, [])
    base = {"summary": summarize([ok, ok])}
    run = {"summary": summarize([ok, bad])}
    assert compare(run, base, {"read": 0.6}) == []
    (failure,) = compare(run, base, {"read": 0.05})
    assert failure.startswith("read tools: correct-call rate 50.0%")


def test_hard_fails_are_judged_on_every_returned_call():
    """A model switch fails outright on an invalid call (checked against the tool's
    schema, not only the expected fields), an invented value, a write called twice and a
    question where everything was given."""
    from server.eval.report import hard_failures, scenario_changes
    from server.eval.scenarios import Scenario, ScenarioFile

    write = ScenarioFile.model_validate({
        "tool": "refund", "class": "write", "tools": ["refund"], "scenarios": [
            {"id": "all-given", "kind": "positive", "user": "refund order 7",
             "expect": {"tool": "refund", "fields": {"order": 7}}},
            {"id": "no-amount", "kind": "boundary", "user": "refund my order",
             "expect": {"tool": "refund", "absent": ["order"]}}]})
    given, missing = write.scenarios
    schema = {"refund": {"type": "object", "properties": {"order": {"type": "integer"}},
                         "required": ["order"], "additionalProperties": False}}
    judged = {
        "invalid": score(write, given, [("refund", {"order": "seven"})], schemas=schema),
        "invented": score(write, missing, [("refund", {"order": 12})], schemas=schema),
        "twice": score(write, given, [("refund", {"order": 7}), ("refund", {"order": 7})],
                       schemas=schema),
        "asked": score(write, given, [], schemas=schema, asked=True),
        "right": score(write, given, [("refund", {"order": 7})], schemas=schema),
        "asked-rightly": score(write, missing, [], schemas=schema, asked=True)}
    assert {k: o.hard_fails for k, o in judged.items()} == {
        "invalid": ["invalid_call"], "invented": ["invented_value"],
        "twice": ["write_called_twice"], "asked": ["question_where_all_given"],
        "right": [], "asked-rightly": []}
    run = {"results": [o.to_json() for o in judged.values()]}
    assert len(hard_failures(run)) == 4
    base = {"results": [judged["right"].to_json()]}
    now = {"results": [judged["invalid"].to_json()]}
    (changed,) = scenario_changes(now, base)
    assert changed.startswith("all-given: now wrong") and "'order'" in changed
    assert "seven" not in changed  # values are kept as hashes: a run holds no user text
    assert isinstance(given, Scenario)


def test_the_servers_runtime_fields_are_not_the_models_call():
    """A contract's runtime fields (a tenant from a header, a generated idempotency key)
    are added by the server; the call checked against the tool's schema is the model's."""
    from server.eval.runner import _without

    returned = {"title": "VPN down", "tenant_id": "acme", "idempotency_key": "idem_1"}
    assert _without(returned, ["idempotency_key", "tenant_id"]) == {"title": "VPN down"}
    assert _without(returned, None) == returned
