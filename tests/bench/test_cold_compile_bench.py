"""`strictcall-bench cold-compile` end to end on a small folder written here: the client
schema's check is timed, and *from the schema* (check plus bridge) is what the headline
reports beside the bridge alone."""

from __future__ import annotations

import json

import pytest

from bench.report.page_speed import cold_compile
from bench.speed.cold_compile import main


def _case(folder, name, schema, tests):
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps({
        "schema": schema, "tests": [{"data": d, "valid": v} for d, v in tests]}))


def _wide(n: int) -> dict:
    """Many properties, each an object of its own: xgrammar takes longer than the wait."""
    return {"type": "object", "properties": {
        f"p{i}": {"type": "object", "properties": {"a": {"type": "string", "maxLength": 9},
                                                   "b": {"enum": ["x", "y", str(i)]}},
                  "required": ["a"]} for i in range(n)}}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    cat = tmp_path_factory.mktemp("coldbench") / "Tiny"
    _case(cat, "a_small", {"type": "object", "properties": {"a": {"type": "integer"}},
                           "required": ["a"]}, [({"a": 1}, True), ({"a": "x"}, False)])
    _case(cat, "b_wide", _wide(60), [({"p0": {"a": "s"}}, True), ({"p0": {}}, False)])
    _case(cat, "c_refused", {"type": "strnig"}, [])
    out = cat.parent / "report.json"
    assert main([str(cat), "--out", str(out), "--wait-ms", "1"]) == 0
    return json.loads(out.read_text())


def test_each_served_schema_has_its_check_timed_and_counted_from_the_schema(results):
    [cat] = results["categories"]
    assert (cat["schemas"], cat["served"], cat["refused"]) == (2, 2, 1)
    assert all(r["check_ms"] > 0 and r["first_ms"] > 0 for r in cat["rows"])
    slowest = max(r["check_ms"] + r["first_ms"] for r in cat["rows"])
    assert cat["from_schema_p99"] == slowest >= cat["bridge_p99"]
    assert cat["check_p50"] <= cat["check_p99"]


def test_the_headline_names_the_time_from_the_client_schema(results):
    page = cold_compile(results)
    [cat] = results["categories"]
    assert f"(Tiny), {cat['from_schema_p99']:.0f} ms with the schema's check;" \
        in page.headline


def test_a_schema_over_the_servers_default_budgets_is_counted_and_timed_apart(results):
    # b_wide's 60 optional top-level properties exceed max_optional_params (24): a server
    # with its default budgets refuses it before any check, so its time is not in the
    # within-budgets p99, which is a_small's alone.
    [cat] = results["categories"]
    rows = {r["over_budget"]: r for r in cat["rows"]}
    assert set(rows) == {None, "max_optional_params"}
    assert cat["over_budget"] == {"max_optional_params": 1}
    small = rows[None]
    assert cat["from_schema_p99_within_budgets"] == small["check_ms"] + small["first_ms"]
    page = cold_compile(results)
    assert (f"; {cat['from_schema_p99_within_budgets']:.0f} ms (Tiny) within the default "
            "budgets (1 of 2 schemas over them), against") in page.headline
    assert "max_optional_params 1" in page.sections[0]


def test_a_file_from_before_the_check_was_timed_renders_without_it(results):
    old = json.loads(json.dumps(results))
    for cat in old["categories"]:
        for key in ("check_p50", "check_p99", "from_schema_p99", "over_budget",
                    "from_schema_p99_within_budgets"):
            del cat[key]
    page = cold_compile(old)
    assert "the schema's check" not in page.headline and "budgets" not in page.headline
    assert page.headline.startswith("cold p99 with the bridge at most")
