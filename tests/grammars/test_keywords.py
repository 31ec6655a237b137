"""The keyword table, checked against the backend itself: a keyword classified `grammar` is
one the mask really enforces (a value breaking it cannot be decoded); a `validator` keyword
is one it does not, so it is left out of the compiled schema and the post-decode check
(jsonschema, with formats) refuses the value; a `rejected` one is a 400 naming it."""

import json

import pytest

from grammars import JsonSchemaSpec, UnsupportedSchemaError, check_schema
from grammars.keywords import XGRAMMAR_KEYWORDS, analyze
from grammars.validate import validator_for


def validator_accepts(schema, value) -> bool:
    return validator_for(schema).is_valid(value)


def mask_accepts(backend, schema, text) -> bool:
    spec = JsonSchemaSpec.from_schema(schema, table=XGRAMMAR_KEYWORDS)
    return backend.accepts(backend.compile(spec), text)


# (schema, keyword, pointer, a value that breaks only that keyword)
GRAMMAR = [
    ({"type": "integer"}, "type", "/type", '"1"'),
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
     "required", "/required", "{}"),
    ({"type": "object", "properties": {"a": {}}, "additionalProperties": False},
     "additionalProperties", "/additionalProperties", '{"b":1}'),
    ({"type": "array", "items": {"type": "integer"}}, "items", "/items", '["x"]'),
    ({"type": "array", "prefixItems": [{"type": "integer"}]}, "prefixItems", "/prefixItems",
     '["x"]'),
    ({"type": "array", "items": {"type": "integer"}, "minItems": 2}, "minItems", "/minItems",
     "[1]"),
    ({"type": "array", "items": {"type": "integer"}, "maxItems": 1}, "maxItems", "/maxItems",
     "[1,2]"),
    ({"enum": ["a", "b"]}, "enum", "/enum", '"c"'),
    ({"const": 3}, "const", "/const", "4"),
    ({"anyOf": [{"type": "integer"}, {"type": "boolean"}]}, "anyOf", "/anyOf", '"x"'),
    ({"oneOf": [{"type": "integer"}, {"type": "boolean"}]}, "oneOf", "/oneOf", '"x"'),
    ({"allOf": [{"type": "integer"}]}, "allOf", "/allOf", '"x"'),
    ({"$defs": {"n": {"type": "integer"}}, "$ref": "#/$defs/n"}, "$ref", "/$ref", '"x"'),
    ({"type": "integer", "minimum": 5}, "minimum", "/minimum", "4"),
    ({"type": "integer", "maximum": 5}, "maximum", "/maximum", "6"),
    ({"type": "integer", "exclusiveMinimum": 5}, "exclusiveMinimum", "/exclusiveMinimum",
     "5"),
    ({"type": "integer", "exclusiveMaximum": 5}, "exclusiveMaximum", "/exclusiveMaximum",
     "5"),
    ({"type": "integer", "multipleOf": 3}, "multipleOf", "/multipleOf", "4"),
    ({"type": "string", "minLength": 2}, "minLength", "/minLength", '"a"'),
    ({"type": "string", "maxLength": 2}, "maxLength", "/maxLength", '"abc"'),
    ({"type": "string", "pattern": "^[0-9]+$"}, "pattern", "/pattern", '"x"'),
    ({"type": "string", "format": "date"}, "format", "/format", '"yesterday"'),
    ({"type": "string", "format": "uuid"}, "format", "/format", '"not-a-uuid"'),
    ({"type": "string", "format": "date-time"}, "format", "/format", '"2022-01-01T12:00:00"'),
    ({"type": "string", "format": "time"}, "format", "/format", '"12:00:00"'),
    ({"type": "object", "minProperties": 1}, "minProperties", "/minProperties", "{}"),
    ({"type": "object", "maxProperties": 1}, "maxProperties", "/maxProperties",
     '{"a":1,"b":2}'),
    ({"type": "object", "properties": {"a": {"type": "integer"}}}, "additionalProperties",
     "/additionalProperties", '{"a":1,"b":2}'),  # absent: strict objects
    ({"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer", "minimum": 5,
      "exclusiveMinimum": True}, "exclusiveMinimum", "/exclusiveMinimum", "5"),
    ({"$schema": "http://json-schema.org/draft-07/schema#", "type": "array",
      "items": [{"type": "integer"}], "additionalItems": False}, "items", "/items", '["x"]'),
    # oneOf branches xgrammar 0.2.9 proves disjoint (a discriminator), multipleOf within its
    # limits: exactly as the schema says.
    ({"oneOf": [{"type": "object", "properties": {"k": {"const": "a"}}, "required": ["k"]},
                {"type": "object", "properties": {"k": {"enum": ["b", "c"]}},
                 "required": ["k"]}]}, "oneOf", "/oneOf", '{"k":"d"}'),
    ({"type": "integer", "multipleOf": 5, "minimum": 0, "maximum": 100}, "multipleOf",
     "/multipleOf", "7"),
]


@pytest.mark.parametrize(("schema", "keyword", "pointer", "bad"), GRAMMAR,
                         ids=[f"{k}{i}" for i, (_, k, _, _) in enumerate(GRAMMAR)])
def test_grammar_keywords_are_enforced_by_the_mask(backend, schema, keyword, pointer, bad):
    report = analyze(schema, table=XGRAMMAR_KEYWORDS).report
    uses = {(u.pointer, u.keyword): u.tier for u in report.uses}
    assert uses[(pointer, keyword)] == "grammar"
    assert not validator_accepts(schema, json.loads(bad)) or keyword == "additionalProperties"
    assert not mask_accepts(backend, schema, bad)


# (schema, keyword, pointer, a value that breaks only that keyword, one that keeps it)
VALIDATOR = [
    ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, "uniqueItems",
     "/uniqueItems", "[1,1]", "[1,2]"),
    ({"type": "integer", "not": {"const": 3}}, "not", "/not", "3", "4"),
    ({"type": "object", "if": {"required": ["a"]}, "then": {"required": ["b"]}}, "if", "/if",
     '{"a":1}', '{"a":1,"b":2}'),
    ({"type": "object", "dependentRequired": {"a": ["b"]}}, "dependentRequired",
     "/dependentRequired", '{"a":1}', '{"a":1,"b":2}'),
    ({"type": "object", "patternProperties": {"^x_": {"type": "integer"}},
      "additionalProperties": False}, "patternProperties", "/patternProperties",
     '{"x_a":"s"}', '{"x_a":1}'),
    ({"allOf": [{"type": "object"}, {"required": ["a"]}]}, "allOf", "/allOf", "{}",
     '{"a":1}'),
    ({"type": "array", "items": {"type": "integer"}, "contains": {"const": 1}}, "contains",
     "/contains", "[2]", "[2,1]"),
    ({"type": "object", "propertyNames": {"maxLength": 2}}, "propertyNames",
     "/propertyNames", '{"abc":1}', '{"ab":1}'),
    ({"type": "string", "pattern": "^[a-f]+$", "maxLength": 3}, "maxLength", "/maxLength",
     '"abcdef"', '"abc"'),
    ({"type": "string", "format": "email", "minLength": 8}, "minLength", "/minLength",
     '"a@b.co"', '"ab@cd.com"'),
    ({"type": "string", "format": "regex"}, "format", "/format", '"("', '"a+"'),
    # Glaive's calculate_area: which fields are required depends on the shape.
    ({"type": "object", "properties": {"shape": {"enum": ["circle", "square"]},
                                       "radius": {"type": "number"}},
      "oneOf": [{"properties": {"shape": {"const": "circle"}}, "required": ["radius"]},
                {"properties": {"shape": {"const": "square"}}, "required": ["side"]}]},
     "oneOf", "/oneOf", '{"shape":"circle"}', '{"shape":"circle","radius":1}'),
    # Measured on xgrammar 0.2.9: beside a union, other assertions are not enforced...
    ({"type": "integer", "minimum": 3, "anyOf": [{"maximum": 10}, {"const": 20}]},
     "minimum", "/minimum", "1", "5"),
    # ...unless they carry the shape (enum, const, properties): then the union waits.
    ({"type": "string", "enum": ["a", "bb", "ccc"], "anyOf": [{"maxLength": 1},
                                                               {"minLength": 3}]},
     "anyOf", "/anyOf", '"bb"', '"ccc"'),
    # A one-branch allOf is a union of one: the same.
    ({"type": "integer", "minimum": 3, "allOf": [{"type": "integer", "maximum": 10}]},
     "minimum", "/minimum", "1", "5"),
    ({"type": "object", "properties": {"a": {"type": "integer"},
                                       "b": {"type": ["integer", "string"]}},
      "allOf": [{"properties": {"b": {"type": "integer"}}}]},
     "allOf", "/allOf", '{"a":1,"b":"x"}', '{"a":1,"b":2}'),
    # multipleOf holds for integers only; `number` values pass the mask.
    ({"type": "number", "multipleOf": 2}, "multipleOf", "/multipleOf", "3", "4"),
    # required names not in properties: the mask would ignore them, or refuse the value.
    ({"type": "object", "required": ["a"], "additionalProperties": True}, "required",
     "/required", "{}", '{"a":1}'),
    # xgrammar 0.2.9 drops multipleOf on integers with one bound, bounds over 10000 apart,
    # or a divisor over 1024 (a warning on stderr only).
    ({"type": "integer", "multipleOf": 5, "minimum": 0}, "multipleOf", "/multipleOf", "3",
     "5"),
    ({"type": "integer", "multipleOf": 5, "minimum": 0, "maximum": 10000}, "multipleOf",
     "/multipleOf", "3", "5"),
    ({"type": "integer", "multipleOf": 2000}, "multipleOf", "/multipleOf", "3", "4000"),
    # Beside a $ref, xgrammar 0.2.9 follows the $ref alone: other assertions are not
    # enforced (JsonSchemaStore's Discord webhook: a pattern beside a string $ref).
    ({"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s", "pattern": "^https?://.*$"},
     "pattern", "/pattern", '"ftp://x"', '"https://x"'),
    ({"$defs": {"n": {"type": "integer"}}, "$ref": "#/$defs/n", "minimum": 5},
     "minimum", "/minimum", "1", "7"),
    ({"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s", "enum": ["a"]},
     "enum", "/enum", '"b"', '"a"'),
    # Beside a format it enforces, xgrammar 0.2.9 ignores the pattern.
    ({"type": "string", "format": "uri", "pattern": "^mailto:"}, "pattern", "/pattern",
     '"https://example.com/x"', '"mailto:a@b.co"'),
    # ...and reads a $ref outside '#/...' (an embedded $id's) as any value.
    ({"$defs": {"n": {"$id": "https://example.com/n", "type": "integer"}},
      "$ref": "https://example.com/n"}, "$ref", "/$ref", '"x"', "1"),
    # OpenAPI 3's data type formats (Kubernetes' schemas carry them): each value of the
    # format's own type held to it after decoding.
    ({"type": "integer", "format": "int32"}, "format", "/format", "2147483648", "2147483647"),
    ({"type": "integer", "format": "int32"}, "format", "/format", "-2147483649",
     "-2147483648"),
    ({"type": "integer", "format": "int64"}, "format", "/format", "9223372036854775808",
     "-9223372036854775808"),
    ({"type": "number", "format": "float"}, "format", "/format",
     "340282366920938463463374607431768211456", "-3.4e+38"),
    ({"type": "number", "format": "double"}, "format", "/format",
     "1" + "0" * 400, "1.7e+308"),
    ({"type": "string", "format": "byte"}, "format", "/format", '"aGVsbG8"', '"aGVsbG8="'),
    ({"type": "string", "format": "byte"}, "format", "/format", '"a b="', '""'),
]


@pytest.mark.parametrize(("schema", "keyword", "pointer", "bad", "good"), VALIDATOR,
                         ids=[f"{k}{i}" for i, (_, k, *_) in enumerate(VALIDATOR)])
def test_validator_keywords_are_left_to_the_post_decode_check(backend, schema, keyword,
                                                               pointer, bad, good):
    analysis = analyze(schema, table=XGRAMMAR_KEYWORDS)
    uses = {(u.pointer, u.keyword): u.tier for u in analysis.report.uses}
    assert uses[(pointer, keyword)] == "validator"
    # Left out of the compiled schema: the mask lets both through (it only relaxed) ...
    assert mask_accepts(backend, schema, bad) and mask_accepts(backend, schema, good)
    # ... and the validator, which always runs with the client's schema, decides.
    assert not validator_accepts(schema, json.loads(bad))
    assert validator_accepts(schema, json.loads(good))


@pytest.mark.parametrize(("schema", "good", "bad"), [
    ({"type": "array", "minItems": 2}, '[1,"x"]', "[1]"),
    ({"type": "object", "minProperties": 1}, '{"a":[true]}', "{}"),
    ({"type": "object", "maxProperties": 1}, '{"a":1}', '{"a":1,"b":2}'),
])
def test_size_keywords_without_listed_members_mean_any_member(backend, schema, good, bad):
    """xgrammar's strict mode reads a missing items/additionalProperties as "none" once a
    size keyword is present; the grammar schema says "any", as JSON Schema means."""
    assert mask_accepts(backend, schema, good)
    assert not mask_accepts(backend, schema, bad)


def test_keywords_inside_a_validator_only_subschema_are_validator_tier():
    report = analyze({"type": "integer", "not": {"enum": [1, 2]}}, table=XGRAMMAR_KEYWORDS).report
    tiers = {u.pointer: u.tier for u in report.uses}
    assert tiers["/not"] == tiers["/not/enum"] == "validator"
    assert tiers["/type"] == "grammar"


@pytest.mark.parametrize("schema", [
    {"title": "T", "description": "d", "examples": [1], "default": 1, "$comment": "c",
     "deprecated": False, "readOnly": False, "x-vendor": 1, "type": "integer"},
])
def test_annotations_change_nothing(schema):
    analysis = analyze(schema, table=XGRAMMAR_KEYWORDS)
    tiers = {u.keyword: u.tier for u in analysis.report.uses}
    assert tiers.pop("type") == "grammar"
    assert set(tiers.values()) == {"annotation"}
    assert analysis.grammar_schema == schema


@pytest.mark.parametrize(("key", "vocabulary"), [
    ("example", "OpenAPI 3"), ("links", "JSON Hyper-Schema"), ("readonly", "JSON Hyper-Schema"),
    ("javaType", "jsonschema2pojo"), ("propertyOrder", "json-editor"),
    ("faker", "json-schema-faker"), ("errorMessage", "Ajv"), ("self", "Iglu (Snowplow)"),
    ("markdownDescription", "VS Code"), ("deprecationMessage", "VS Code"),
    ("defaultSnippets", "VS Code"), ("markdownEnumDescriptions", "VS Code"),
    ("x-vendor", "prefix"), ("_uniqueItems", "prefix"), ("@context", "prefix"),
    ("ui:widget", "prefix")])
def test_other_vocabularies_annotations_are_known(key, vocabulary, backend):
    schema = {"type": "array", key: True}
    analysis = check_schema(schema, table=XGRAMMAR_KEYWORDS)
    use = next(u for u in analysis.report.uses if u.keyword == key)
    assert use.tier == "annotation"
    assert vocabulary in use.note
    assert analysis.grammar_schema[key] is True
    # An annotation, even one named like a rule once commented out, leaves values alone.
    assert mask_accepts(backend, analysis.grammar_schema, "[1,1]")


@pytest.mark.parametrize(("key", "hint"), [
    ("additonalProperties", "did you mean 'additionalProperties'"),
    ("maxLenght", "did you mean 'maxLength'"), ("oneof", "did you mean 'oneOf'"),
    ("nullable", '"null"'), ("divisibleBy", "multipleOf"), ("min", "'minimum'")])
def test_unknown_keywords_that_look_like_rules_get_a_hint(key, hint):
    with pytest.raises(UnsupportedSchemaError) as info:
        check_schema({"type": "object", key: 1}, table=XGRAMMAR_KEYWORDS)
    assert hint in info.value.message
    assert info.value.details[0]["keyword"] == key


@pytest.mark.parametrize(("schema", "keyword", "pointer"), [
    ({"type": "string", "nullable": True}, "nullable", "/nullable"),
    ({"type": "object", "properties": {"p": {"type": "string", "format": "phone"}}},
     "format", "/properties/p/format"),
    ({"type": "object", "properties": {"deep": {"type": "array", "items": {
        "type": "integer", "exclusiveMinimumX": 1}}}}, "exclusiveMinimumX",
     "/properties/deep/items/exclusiveMinimumX"),
])
def test_keywords_nothing_enforces_are_rejected_by_name_and_pointer(schema, keyword, pointer):
    with pytest.raises(UnsupportedSchemaError) as info:
        check_schema(schema, table=XGRAMMAR_KEYWORDS)
    assert info.value.pointer == pointer
    assert keyword in info.value.message
    assert info.value.details[0]["pointer"] == pointer
    assert info.value.hint


def test_every_keyword_occurrence_is_reported_once():
    schema = {"type": "object", "properties": {
        "a": {"type": "string", "maxLength": 3, "description": "x"},
        "not": {"type": "integer"}},  # a property called "not" is no keyword
        "required": ["a"], "additionalProperties": False}
    report = analyze(schema, table=XGRAMMAR_KEYWORDS).report
    pointers = [u.pointer for u in report.uses]
    assert sorted(pointers) == sorted([
        "/type", "/properties", "/required", "/additionalProperties",
        "/properties/a/type", "/properties/a/maxLength", "/properties/a/description",
        "/properties/not/type"])
    assert report.counts() == {"grammar": 7, "validator": 0, "annotation": 1, "rejected": 0}


def test_summary_names_validator_keywords():
    report = analyze({"type": "array", "uniqueItems": True, "title": "t"},
                     table=XGRAMMAR_KEYWORDS).report
    assert report.summary() == "grammar=1, validator=1, annotation=1; validator: " \
                               "uniqueItems@/uniqueItems"


def test_table_is_the_backends_own(backend):
    assert backend.keywords == XGRAMMAR_KEYWORDS


@pytest.mark.parametrize("schema", [
    {"type": "string", "pattern": "^\\p{L}+$"},
    {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
     "patternProperties": {"^[z-a]": {}}},  # compiles in neither RE2 nor `regex`
])
def test_patterns_the_validator_cannot_run_are_refused(schema):
    from grammars import GrammarError

    with pytest.raises(GrammarError) as info:
        check_schema(schema, table=XGRAMMAR_KEYWORDS)
    assert "pattern" in info.value.pointer or "regex" in info.value.message


@pytest.mark.parametrize("types", ["string", ["string", "null"], None])
def test_uri_reference_mask_takes_absolute_and_relative_references(backend, types):
    """xgrammar 0.2.9's own uri-reference mask refuses every absolute URI."""
    schema = {"format": "uri-reference"} | ({"type": types} if types else {})
    analysis = check_schema(schema, table=XGRAMMAR_KEYWORDS)
    assert [u.tier for u in analysis.report.uses if u.keyword == "format"] == ["grammar"]
    for good in ['"http://example.com/a?b#c"', '"../a"', '"#frag"', '""']:
        assert mask_accepts(backend, analysis.grammar_schema, good), good
    assert not mask_accepts(backend, analysis.grammar_schema, '"a b"')
    assert mask_accepts(backend, analysis.grammar_schema, "null") == (types != "string")


@pytest.mark.parametrize("name", ["binary", "password"])
def test_openapi_formats_that_restrict_nothing_are_annotations(backend, name):
    schema = {"type": "string", "format": name}
    analysis = check_schema(schema, table=XGRAMMAR_KEYWORDS)
    use = next(u for u in analysis.report.uses if u.keyword == "format")
    assert use.tier == "annotation" and "OpenAPI" in use.note
    assert "format" not in analysis.grammar_schema  # no backend reads it
    assert mask_accepts(backend, schema, '"any text at all"')
    assert validator_accepts(schema, "any text at all")


def test_an_openapi_shaped_schema_is_served_with_its_formats_left_to_the_validator():
    """The shape of Kubernetes' generated schemas: 71 of them were refused whole, one
    `format: int32` each, before these formats were known."""
    schema = {"type": "object", "properties": {
        "replicas": {"type": "integer", "format": "int32"},
        "generation": {"type": "integer", "format": "int64"},
        "caBundle": {"type": "string", "format": "byte"},
        "binaryData": {"type": "object", "additionalProperties": {
            "type": "string", "format": "byte"}}}}
    analysis = check_schema(schema, table=XGRAMMAR_KEYWORDS)
    formats = [u for u in analysis.report.uses if u.keyword == "format"]
    assert [u.tier for u in formats] == ["validator"] * 4
    assert "format" not in json.dumps(analysis.grammar_schema)
    assert validator_accepts(schema, {"replicas": 3, "caBundle": "Zm9v",
                                      "binaryData": {"k": "YmFy"}})
    assert not validator_accepts(schema, {"replicas": 2 ** 31})
    assert not validator_accepts(schema, {"binaryData": {"k": "not base64!"}})


def test_formats_are_checked_whatever_the_draft():
    """A format the report calls checked is checked: draft-04's own checker has no `date`."""
    schema = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "string",
              "format": "date"}
    uses = analyze(schema, table=XGRAMMAR_KEYWORDS).report.uses
    assert [u.tier for u in uses if u.keyword == "format"] == ["grammar"]
    assert not validator_for(schema).is_valid("2022-01-32")
    assert validator_for(schema).is_valid("2022-01-31")


# Approximations: the mask enforces part of a keyword, the validator the rest. (schema,
# keyword, pointer, a value only the validator refuses, a valid one, one the mask refuses)
PARTIAL = [
    # xgrammar 0.2.9 reads a oneOf it cannot prove disjoint as anyOf.
    ({"oneOf": [{"type": "integer"}, {"type": "number"}]}, "oneOf", "/oneOf", "5", "5.5",
     '"x"'),
    ({"oneOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
                 "additionalProperties": True},
                {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"],
                 "additionalProperties": True}]}, "oneOf", "/oneOf", '{"a":1,"b":2}',
     '{"a":1}', "{}"),
    # It drops lookaheads (and refuses lookbehinds): both compiled without them.
    ({"type": "string", "pattern": "^(?!abc)[a-z]+$"}, "pattern", "/pattern", '"abc"',
     '"abd"', '"A1"'),
    ({"type": "string", "pattern": "^[a-z]+(?<!c)$"}, "pattern", "/pattern", '"abc"',
     '"abd"', '"A1"'),
]


@pytest.mark.parametrize(("schema", "keyword", "pointer", "bad", "good", "outside"), PARTIAL,
                         ids=[f"{k}{i}" for i, (_, k, *_) in enumerate(PARTIAL)])
def test_approximated_keywords_are_split_between_mask_and_validator(
        backend, schema, keyword, pointer, bad, good, outside):
    analysis = analyze(schema, table=XGRAMMAR_KEYWORDS)
    tiers = [u.tier for u in analysis.report.uses if (u.pointer, u.keyword) == (pointer, keyword)]
    assert tiers == ["grammar", "validator"]
    assert keyword in analysis.grammar_schema  # kept: the mask enforces what it can of it
    assert f"{keyword}@{pointer}" in analysis.report.summary()
    assert mask_accepts(backend, schema, bad) and mask_accepts(backend, schema, good)
    assert not mask_accepts(backend, schema, outside)
    assert not validator_accepts(schema, json.loads(bad))
    assert validator_accepts(schema, json.loads(good))


@pytest.mark.parametrize("branches", [
    [{"type": "integer"}, {"type": "boolean"}], [{"type": "integer"}, {"type": "number"}],
    [{"type": "string", "maxLength": 3}, {"type": "integer"}],
    [{"type": "string", "title": "t"}, {"type": ["integer", "null"]}],
    [{"type": "object"}, {"type": "integer"}], [{"const": 1}, {"const": 2}],
    [{"const": 1}, {"const": 1.0}], [{"enum": ["a", 1]}, {"type": "integer"}],
    [{"enum": ["a", [1]]}, {"type": "array"}], [{"$ref": "#/$defs/n"}, {"type": "string"}],
    [{"type": "object", "properties": {"k": {"const": 1}}, "required": ["k"]},
     {"type": "object", "properties": {"k": {"const": 1}}, "required": ["k"]}],
])
def test_oneof_disjointness_is_decided_as_xgrammar_does(capfd, branches):
    """Compiled by xgrammar itself, which warns (on stderr only) where it reads oneOf as
    anyOf: the report says so exactly there."""
    import xgrammar

    schema = {"$defs": {"n": {"type": "integer"}}, "oneOf": branches}
    capfd.readouterr()
    xgrammar.Grammar.from_json_schema(json.dumps(schema), strict_mode=True)
    warned = "cannot be represented exactly" in capfd.readouterr().err
    uses = analyze(schema, table=XGRAMMAR_KEYWORDS).report.uses
    assert [u.tier for u in uses if u.keyword == "oneOf"] == \
        (["grammar", "validator"] if warned else ["grammar"])
