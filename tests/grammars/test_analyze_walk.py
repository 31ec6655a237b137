"""The keyword analysis's walk (grammars/keywords/_analyze.py): a subschema inside a
validator-only keyword is found by its pointer's prefixes, one lookup per level, with the
meaning the scan over every such keyword had; and a schema with thousands of them (CityJSON's
kind) is analyzed to the same report as a small one of the same shape."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from grammars.keywords import XGRAMMAR_KEYWORDS, analyze
from grammars.keywords._analyze import _under

TOKENS = st.sampled_from(["properties", "a", "a~1b", "not", "if", "items", "0", "ab", "b"])
POINTERS = st.lists(TOKENS, max_size=5).map(lambda ts: "".join(f"/{t}" for t in ts))
# What is removed is always a keyword of some node: "{pointer}/{key}", never the root.
KEYWORDS = st.lists(TOKENS, min_size=1, max_size=5).map(lambda ts: "".join(f"/{t}" for t in ts))


@given(pointer=POINTERS, removed=st.sets(KEYWORDS, max_size=6))
def test_under_means_at_or_inside_a_removed_pointer(pointer, removed):
    scan = any((pointer + "/").startswith(p + "/") for p in removed)
    assert _under(pointer, removed) == scan


def test_a_prefix_that_ends_inside_a_token_is_not_a_parent():
    assert not _under("/properties/ab", {"/properties/a"})
    assert _under("/properties/a/items", {"/properties/a"})
    assert _under("/properties/a", {"/properties/a"})


def _wide(n: int) -> dict:
    """`n` properties, each with a subschema under `not` (not enforced by xgrammar's mask:
    the validator's, and so is everything inside it)."""
    return {"type": "object", "properties": {
        f"p{i}": {"type": "string", "not": {"type": "string", "maxLength": 2}}
        for i in range(n)}}


def test_thousands_of_validator_only_subschemas_are_each_reported_once():
    report = analyze(_wide(3000), XGRAMMAR_KEYWORDS).report
    inside = [u for u in report.uses if "/not/" in u.pointer]
    assert len(inside) == 2 * 3000
    assert all(u.tier == "validator" for u in inside)
    assert {u.note for u in inside if u.keyword == "maxLength"} == {
        "inside a validator-only keyword"}
