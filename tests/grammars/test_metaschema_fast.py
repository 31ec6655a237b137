"""The metaschema check's fast path (grammars/metaschema.py): jsonschema-rs says whether a
schema is valid, jsonschema (Python) decides every other case and words the error. The two
must give one verdict, or the fast path would let through a schema the check refuses. Held
against real schemas (JSONSchemaBench) and the same schemas broken one keyword at a time."""

from __future__ import annotations

import json
import random
import warnings
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema.exceptions import best_match

from grammars import InvalidSchemaError, checked_client_schema
from grammars._walk import iter_schema_nodes
from grammars.metaschema import _FAST, draft_for
from tests.conftest import evaldata

# Values a keyword's metaschema entry refuses, or a format it checks, or neither: the
# property holds whichever the verdict is.
BROKEN: dict[str, tuple[Any, ...]] = {
    "type": ("strnig", 5, ["string", "string"], []),
    "required": ("a", [1], ["a", "a"], {}),
    "minLength": (-1, 1.5, "3", True),
    "maximum": ("9", None),
    "pattern": ("(", "\\p{L}+", "[a-", "(?<n>a)\\k<n>", "^ok$"),
    "enum": (3, [], [1, 1]),
    "properties": ([], 5, {"a": 5}),
    "items": (5, "x", [5]),
    "$id": ("not a uri ^^", "#frag", 5, "https://example.com/s.json"),
    "$ref": ("a b", 5, "#/definitions/x"),
    "$schema": ({}, "nope", "http://json-schema.org/draft-07/schema#"),
    "anyOf": ([], {}, [5]),
    "additionalProperties": ("no", 5, False),
    "patternProperties": ({"(": {}}, {"^a": 5}, {"^\\w+$": {}}),
    "multipleOf": (0, -2, 0.5),
    "uniqueItems": ("yes", 1),
    "format": (5, "date", "no-such-format"),
}


def _verdicts(schema: dict[str, Any]) -> tuple[bool, bool]:
    """(the fast path's, jsonschema's). Python's `re` warns on some real patterns ("possible
    nested set"), which this suite turns into errors; the server does not."""
    cls = draft_for(schema)
    meta = cls.META_SCHEMA
    checker = jsonschema.validators.validator_for(meta, default=cls)(
        meta, format_checker=cls.FORMAT_CHECKER)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return _FAST.valid(cls, schema), best_match(checker.iter_errors(schema)) is None


def _real_schemas() -> list[dict[str, Any]]:
    """Every 7th schema of three JSONSchemaBench categories: drafts 4 to 2020-12, large and
    small, keyword-rich (Kubernetes, JsonSchemaStore) and plain (Github_medium)."""
    found = []
    for category in ("Kubernetes", "JsonSchemaStore", "Github_medium"):
        paths = sorted(evaldata(f"jsonschemabench/{category}").glob("*.json"))[::7]
        found += [s for p in paths if isinstance(s := json.loads(p.read_text())["schema"],
                                                 dict)]
    return found


@pytest.fixture(scope="module")
def real() -> list[dict[str, Any]]:
    return _real_schemas()


def test_real_schemas_get_one_verdict_from_both(real):
    assert len(real) > 100
    verdicts = [_verdicts(s) for s in real]
    assert all(fast == slow for fast, slow in verdicts)
    assert sum(slow for _, slow in verdicts) > 100  # mostly valid: the fast path answered


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), key=st.sampled_from(sorted(BROKEN)),
       data=st.data())
def test_a_schema_broken_at_one_node_gets_one_verdict_from_both(real, seed, key, data):
    schema = json.loads(json.dumps(random.Random(seed).choice(real)))
    nodes = [node for node, _ in iter_schema_nodes(schema)]
    node = nodes[data.draw(st.integers(0, len(nodes) - 1))]
    node[key] = data.draw(st.sampled_from(BROKEN[key]))
    fast, slow = _verdicts(schema)
    assert fast == slow


@pytest.mark.parametrize(("schema", "pointer", "says"), [
    ({"type": "string", "pattern": "\\p{L}+"}, "/pattern", "is not a 'regex'"),
    ({"$id": "not a uri ^^"}, "/$id", "is not a 'uri-reference'"),
    ({"$schema": "http://json-schema.org/draft-04/schema#", "minLength": -1}, "/minLength",
     "less than the minimum"),
])
def test_a_refusal_still_names_python_s_pointer_and_words(schema, pointer, says):
    with pytest.raises(InvalidSchemaError) as info:
        checked_client_schema(schema, where="the schema")
    assert info.value.pointer == pointer and says in info.value.message


def test_integers_past_64_bits_get_one_verdict_from_both():
    for schema in ({"type": "integer", "maximum": 2**80}, {"minLength": 2**70}):
        assert _verdicts(schema) == (True, True)


def test_when_the_fast_path_fails_python_decides(monkeypatch):
    class Broken:
        def is_valid(self, _schema: Any) -> bool:
            raise ValueError("cannot read this value")

    monkeypatch.setattr(_FAST, "_validator", lambda _cls: Broken())
    assert _FAST.valid(draft_for({}), {}) is False
    fresh = {"type": "integer", "title": "seen by no earlier test"}  # (verdicts are cached)
    assert checked_client_schema(fresh, where="the schema") == fresh
    with pytest.raises(InvalidSchemaError, match="is not valid under any"):
        checked_client_schema({**fresh, "type": "integr"}, where="the schema")
