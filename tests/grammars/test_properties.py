"""Property tests of the grammar compiler and the validator, on generated JSON Schemas
(tests/grammars/schema_strategies.py) and generated values: values valid by construction, the
same values broken in one place, and any JSON at all.

Sound: whatever the xgrammar mask accepts as a complete value and the validator accepts is
valid per `jsonschema`; what the mask accepts that is invalid breaks only keywords the
enforcement report gives to the validator. Complete: a valid value the mask refuses is
refused by a generation policy (strict objects, number bounds, bounded strings...) that the
report names: under JSON Schema's reading of every policy the same mask accepts it, unless
the report says the format mask never writes such values (KeywordTable.format_subsets).

Each example compiles its schema under the server's default policies and under JSON
Schema's reading, as the server does (GrammarPolicy.for_backend, GrammarCache). No
deadline: compile times on a shared CPU vary tenfold, and speed is the benches' business.

    STRICTCALL_PROPERTY_EXAMPLES=500 [STRICTCALL_PROPERTY_SEED=N] pytest -m slow \
        --hypothesis-show-statistics tests/grammars/test_properties.py

The seed is random unless set, and fixed for the run (pytest's header prints it): a failure
replays with the same STRICTCALL_PROPERTY_SEED.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

import jsonschema
import pytest

from grammars import (
    DEFAULT_POLICIES,
    JSON_SCHEMA_READING,
    Analysis,
    GrammarCache,
    GrammarPolicy,
    UnsupportedSchemaError,
    canonical_json,
    make_backend,
    validator_for,
)

# about a minute for 200 examples
pytestmark = [pytest.mark.slow, pytest.mark.fuzz, pytest.mark.long]

from hypothesis import HealthCheck, assume, event, given, seed, settings  # noqa: E402 - after the module's marks
from hypothesis import strategies as st  # noqa: E402 - after the module's marks

from tests.conftest import FUZZ_SEEDS  # noqa: E402 - after the module's marks
from tests.grammars.schema_strategies import JSON, as_text, instances, mutated, schemas  # noqa: E402 - after the module's marks

EXAMPLES = int(os.environ.get("STRICTCALL_PROPERTY_EXAMPLES", "200"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])
# What the report says where each policy makes the mask write less than JSON Schema allows.
POLICY_NOTES = {"strict_objects": "strict objects", "number_bounds": "no exponent",
                "bounded_strings": "without escapes", "patterns": "whole match",
                "implied_types": "any other type"}


@dataclass
class Side:
    """One way the server may be configured: a backend, its policy and grammar cache."""

    policy: GrammarPolicy
    cache: GrammarCache

    def analysis(self, schema: dict[str, Any]) -> Analysis:
        return self.policy.check(schema)

    def accepts(self, schema: dict[str, Any], text: str) -> bool:
        grammar = self.cache.get(self.policy.json_schema_spec(schema)).grammar
        return self.cache.backend.accepts(grammar, text)


class Sides(dict[str, Side]):
    """The default policies, JSON Schema's reading, and the default with one policy read
    as JSON Schema reads it (to tell which policy refused a value); `read_as_json_schema`
    builds (once) the default with several policies read so."""

    def __init__(self, tokenizer: Any) -> None:
        super().__init__()
        self._tokenizer = tokenizer
        self["default"] = self._side(DEFAULT_POLICIES)
        self["reading"] = self._side(JSON_SCHEMA_READING)
        for name in POLICY_NOTES:
            self[name] = self._side({**DEFAULT_POLICIES, name: JSON_SCHEMA_READING[name]})

    def _side(self, policies: dict[str, Any]) -> Side:
        backend = make_backend("xgrammar", self._tokenizer, vocab_size=len(self._tokenizer),
                               stop_token_ids=[self._tokenizer.eos_token_id])
        return Side(GrammarPolicy.for_backend(backend, policies), GrammarCache(backend))

    def read_as_json_schema(self, names: list[str]) -> Side:
        key = "+".join(sorted(names))
        if key not in self:
            self[key] = self._side({**DEFAULT_POLICIES,
                                    **{n: JSON_SCHEMA_READING[n] for n in names}})
        return self[key]


@pytest.fixture(scope="module")
def sides(tokenizer) -> Sides:
    return Sides(tokenizer)


def _needed_policies(sides: Sides, schema: dict[str, Any], text: str) -> list[str]:
    """A smallest set of policies that, read as JSON Schema reads them, makes the mask
    accept `text`: each one is needed (put back at its default, the mask refuses again)."""
    needed = list(POLICY_NOTES)
    assert sides.read_as_json_schema(needed).accepts(schema, text), (
        f"every policy read as JSON Schema reads it still refuses the valid {text} for "
        f"{schema}, which JSON Schema's reading accepts")
    for policy in list(needed):
        fewer = [p for p in needed if p != policy]
        if sides.read_as_json_schema(fewer).accepts(schema, text):
            needed = fewer
    return needed


def oracle(schema: dict[str, Any]) -> jsonschema.protocols.Validator:
    """Plain `jsonschema` in the schema's draft (2020-12 here), formats asserted, hostnames
    too (its own checker needs the fqdn package, absent here: RFC 1123 by a pattern)."""
    cls = jsonschema.validators.validator_for(schema)
    checker = jsonschema.FormatChecker(formats=())
    checker.checkers = dict(cls.FORMAT_CHECKER.checkers)  # the draft's own: its `time`
    checker.checks("hostname")(_hostname)
    return cls(schema, format_checker=checker)


def _hostname(value: Any) -> bool:
    return not isinstance(value, str) or (len(value) <= 253 and re.fullmatch(
        r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)(\.(?!-)[A-Za-z0-9-]{1,63}(?<!-))*", value) is not None)


@st.composite
def cases(draw: st.DrawFn) -> tuple[dict[str, Any], list[Any]]:
    """A schema and values to try: valid ones, broken ones, and any JSON."""
    schema = draw(schemas())
    valid = draw(st.lists(instances(schema), min_size=1, max_size=3))
    event(f"schema with {min(len(canonical_json(schema)) // 50, 4) * 50}+ characters")
    event(f"top {schema.get('type', list(schema)[0])}")
    broken = [draw(mutated(v)) for v in valid]
    return schema, [*valid, *broken, draw(JSON)]


def _checked(side: Side, schema: dict[str, Any]) -> Analysis:
    try:
        return side.analysis(schema)
    except UnsupportedSchemaError:  # refused by name with a 400: nothing to decode
        assume(False)
        raise


@seed(FUZZ_SEEDS["STRICTCALL_PROPERTY_SEED"])
@SETTINGS
@given(case=cases())
def test_what_mask_and_validator_accept_is_valid(sides, case):
    schema, values = case
    truth = oracle(schema)
    for name in ("default", "reading"):
        side = sides[name]
        report = _checked(side, schema).report
        validator = validator_for(schema)
        for value in values:
            text = as_text(value, schema)
            if not side.accepts(schema, text):
                event(f"{name}: mask refuses")
                continue
            if validator.is_valid(value):
                assert truth.is_valid(value), (name, text, schema)
            event(f"{name}: mask accepts, " + ("valid" if truth.is_valid(value) else
                                              "invalid (left to the validator)"))
            for error in truth.iter_errors(value):
                assert _left_to_validator(report, error), (
                    f"{name}: the mask wrote {text} for {schema}, which breaks "
                    f"{error.validator} at {_pointer(error)} ({error.message}); the report "
                    f"says {_tiers_at(report, error)}")


@seed(FUZZ_SEEDS["STRICTCALL_PROPERTY_SEED"])
@SETTINGS
@given(case=cases())
def test_a_valid_value_is_refused_only_by_a_reported_policy(sides, case):
    schema, values = case
    truth = oracle(schema)
    default = sides["default"]
    report = _checked(default, schema).report
    notes = " ".join(u.note for u in report.uses)
    for value in filter(truth.is_valid, values):
        text = as_text(value, schema)
        if not sides["reading"].accepts(schema, text):
            # No policy: only a format mask narrower than its format, which the report says.
            event("valid: refused by a format mask the report calls narrower")
            assert "the mask never writes" in notes, \
                f"JSON Schema's reading of every policy refuses the valid {text} for {schema}"
            continue
        if default.accepts(schema, text):
            event("valid: default mask accepts")
            continue
        # Each policy that alone refuses it; else the fewest that refuse it together.
        culprits = [p for p in POLICY_NOTES if sides[p].accepts(schema, text)]
        if culprits:
            event(f"valid: default mask refuses, by {' or '.join(culprits)}")
        else:
            culprits = _needed_policies(sides, schema, text)
            event(f"valid: default mask refuses, by {'+'.join(culprits)} together")
        assert culprits, (text, schema)  # the default refuses what reading them all accepts
        for policy in culprits:
            assert POLICY_NOTES[policy] in notes, (
                f"the {policy} policy refused the valid {text} for {schema}; the report "
                f"does not say so: {report.to_json()}")


def _pointer(error: jsonschema.ValidationError) -> str:
    """The JSON Pointer of the keyword `error` breaks, as the report writes pointers."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1")
                   for p in error.absolute_schema_path)


def _left_to_validator(report, error: jsonschema.ValidationError) -> bool:
    """Whether the report gives what `error` breaks to the validator: its keyword, or for
    a union, every keyword some branch breaks (the mask may have taken that branch)."""
    if "validator" in _tiers_at(report, error):
        return True
    if error.validator in ("anyOf", "oneOf") and error.context:
        branches: dict[Any, list[jsonschema.ValidationError]] = {}
        for sub in error.context:
            branches.setdefault(sub.relative_schema_path[0], []).append(sub)
        return any(all(_left_to_validator(report, sub) for sub in errors)
                   for errors in branches.values())
    return False


def _tiers_at(report, error: jsonschema.ValidationError) -> set[str]:
    """The tiers the report gives the keyword the error breaks (and, for an error inside
    a subschema that a validator-only keyword holds, that keyword's)."""
    pointer = _pointer(error)
    tiers = {u.tier for u in report.uses if u.pointer == pointer}
    if any(u.pointer == pointer and "after decoding" in u.note for u in report.uses):
        tiers.add("validator")  # a format's shape in the mask, the rest checked after
    for use in report.uses:
        if use.tier == "validator" and pointer.startswith(use.pointer + "/"):
            tiers.add("validator")
    return tiers
