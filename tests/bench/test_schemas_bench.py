"""`strictcall-bench schemas` end to end on a small maskbench folder written here."""

from __future__ import annotations

import json

import pytest

from bench.accuracy.schemas import canonical_instance, main


def _case(folder, name, schema, tests):
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps({
        "schema": schema, "tests": [{"data": d, "valid": v} for d, v in tests]}))


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("maskbench")
    cat = root / "Tiny"
    _case(cat, "a_object", {"type": "object", "properties": {"a": {"type": "integer"}},
                            "required": ["a"]},
          [({"a": 1}, True), ({"a": 1, "extra": 2}, True), ({"a": "x"}, False)])
    _case(cat, "b_unique", {"type": "array", "items": {"type": "integer"}, "uniqueItems": True},
          [([1, 2], True), ([1, 1], False)])
    _case(cat, "c_unknown", {"type": "string", "standsFor": "x"}, [("s", True)])
    _case(cat, "d_pattern", {"type": "string", "pattern": "https?://"},
          [("see https://example.com", True), ("ftp://x", False)])
    out = root / "report.json"
    assert main([str(cat), "--out", str(out), "--timeout", "60"]) == 0
    return json.loads(out.read_text())["backends"]["xgrammar"]["categories"]["Tiny"]


def test_summary_counts_each_outcome(report):
    s = report["summary"]
    assert (s["schemas"], s["compiled"]) == (4, 3)
    assert s["valid_accepted"] == s["valid_instances"] == 2
    # {"a": 1, "extra": 2} is valid JSON Schema; strict objects do not generate it. Nor do
    # whole-match patterns (or escape-free bounded strings) a match inside a longer string.
    assert s["valid_refused_by_policy"] == 2
    assert s["by_policy"] == {"strict_objects": 1, "patterns+bounded_strings": 1}
    assert s["invalid_rejected"] == s["invalid_instances"] == 3
    assert s["invalid_caught_by_validator"] == 1  # [1, 1]: uniqueItems, after decoding
    assert s["keywords"]["unclassified"] == 0
    # over every schema: c_unknown's one valid instance counts, as not served
    assert (s["valid_instances_all"], s["valid_in_uncompiled"]) == (5, 1)


def test_the_headline_counts_every_valid_instance_refused_and_uncompiled_included(report):
    from bench.report.page_kinds import schemas

    rendered = schemas({"args": {"limit": 4}, "backends": {"xgrammar": {
        "version": "x", "categories": {"Tiny": {"summary": report["summary"]}}}}})
    assert rendered.headline == (
        "2 of 5 valid test instances of 4 schemas served (accepted by the mask and the "
        "validator); not served: 2 refused by policy, 1 in the 1 schemas refused, "
        "0 refused otherwise")


def test_rejected_schema_names_its_keyword(report):
    record = next(r for r in report["schemas"] if r["file"] == "c_unknown.json")
    assert record["status"] == "rejected"
    assert record["keywords"][0]["keyword"] == "standsFor"
    assert record["alone"] is True  # raw xgrammar ignores the keyword


def test_canonical_instance_follows_property_order_through_refs():
    schema = {"$defs": {"P": {"properties": {"x": {}, "y": {"properties": {
        "b": {}, "a": {}}}}}}, "$ref": "#/$defs/P"}
    value = {"y": {"a": 1, "b": 2}, "x": 0}
    assert list(canonical_instance(value, schema, schema)) == ["x", "y"]
    assert list(canonical_instance(value, schema, schema)["y"]) == ["b", "a"]


def test_canonical_instance_orders_values_of_unlisted_keys_by_additional_properties():
    schema = {"$defs": {"Ref": {"properties": {"b": {}, "a": {}}}},
              "properties": {"x": {}}, "additionalProperties": {"$ref": "#/$defs/Ref"}}
    value = {"other": {"a": 1, "b": 2}, "x": 0}
    out = canonical_instance(value, schema, schema)
    assert list(out) == ["x", "other"] and list(out["other"]) == ["b", "a"]


def test_json_schema_reading_accepts_every_valid_instance(tmp_path):
    cat = tmp_path / "Tiny"
    _case(cat, "a_object", {"type": "object", "properties": {"a": {"type": "integer"}},
                            "required": ["a"]},
          [({"a": 1}, True), ({"a": 1, "extra": 2}, True), ({"a": "x"}, False)])
    _case(cat, "b_pattern", {"type": "string", "pattern": "^https?://"},
          [("https://example.com", True), ("ftp://x", False)])
    out = tmp_path / "report.json"
    assert main([str(cat), "--out", str(out), "--json-schema-reading"]) == 0
    report = json.loads(out.read_text())
    assert report["args"]["patterns"] == "search"
    s = report["backends"]["xgrammar"]["categories"]["Tiny"]["summary"]
    assert s["valid_accepted"] == s["valid_instances"] == 3
    assert s["valid_refused_by_policy"] == 0
    assert s["invalid_rejected"] == s["invalid_instances"] == 2
