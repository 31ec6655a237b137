"""Which keywords exist: JSON Schema's own, and the annotations of other vocabularies that
ride along in schemas. Facts about the specifications, not about any backend."""

from __future__ import annotations

import difflib
import functools

from jsonschema import FormatChecker

from grammars.formats import OPENAPI_FORMATS

ANNOTATIONS = frozenset({
    "title", "description", "examples", "default", "$comment", "$schema", "$id", "id",
    "deprecated", "readOnly", "writeOnly", "contentMediaType", "contentEncoding",
    "contentSchema", "discriminator", "$vocabulary"})

# Annotation keywords of other published vocabularies that ride along in JSON Schemas, as
# their own specifications define them: none changes what is valid. (OpenAPI 3.0's
# `nullable` does, so it is not here: it is rejected with a hint.)
VOCABULARY_ANNOTATIONS: dict[str, frozenset[str]] = {
    "OpenAPI 3": frozenset({"example", "xml", "externalDocs"}),
    "JSON Hyper-Schema": frozenset({
        "links", "base", "media", "mediaType", "binaryEncoding", "pathStart",
        "fragmentResolution", "readonly", "alternate"}),
    "jsonschema2pojo": frozenset({
        "javaType", "javaName", "javaInterfaces", "javaEnumNames", "javaEnums",
        "existingJavaType", "customDatePattern", "customTimePattern", "customDateTimePattern",
        "excludedFromEqualsAndHashCode", "javaJsonView", "extendsJavaClass"}),
    "json-editor / react-jsonschema-form": frozenset({
        "options", "propertyOrder", "headerTemplate", "enumNames", "enum_titles"}),
    "json-schema-faker": frozenset({"faker", "chance"}),
    "Ajv": frozenset({"$async", "errorMessage"}),
    # Snowplow's self-describing schemas: `self` names the schema (vendor, name, format,
    # version) in the Iglu registry; no validator enforces it (JsonSchemaStore's Snowplow
    # family was refused whole for it).
    "Iglu (Snowplow)": frozenset({"self"}),
    # VS Code's JSON language service (its jsonSchema.ts, "VS Code extensions"): hover text,
    # completion and editor hints, written into the schemas JSON Schema Store serves for
    # VS Code. (Its errorMessage is listed under Ajv, above.)
    "VS Code": frozenset({
        "markdownDescription", "deprecationMessage", "markdownDeprecationMessage",
        "enumDescriptions", "markdownEnumDescriptions", "defaultSnippets",
        "patternErrorMessage", "doNotSuggest", "suggestSortText", "allowComments",
        "allowTrailingCommas"}),
}
VOCABULARY_OF = {key: name for name, keys in VOCABULARY_ANNOTATIONS.items() for key in keys}
# Prefixes that mark a key as no rule: OpenAPI's extensions (`x-`), keys commented out or
# private by convention (`_comment`, `_uniqueItems`), JSON-LD (`@context`), and
# react-jsonschema-form's `ui:` options.
ANNOTATION_PREFIXES = ("x-", "_", "@", "ui:")

# Unknown keywords that are rules elsewhere: what to write instead.
INSTEAD = {
    "nullable": "OpenAPI 3.0's nullable: write the type as [<type>, \"null\"]",
    "divisibleBy": "draft-03's divisibleBy is multipleOf",
    "extends": "draft-03's extends is allOf",
    "disallow": "draft-03's disallow is not: {\"type\": ...}",
    "optional": "draft-03's optional: list the other properties in \"required\"",
    "min": "did you mean 'minimum'?", "max": "did you mean 'maximum'?",
    "minValue": "did you mean 'minimum'?", "maxValue": "did you mean 'maximum'?",
    "constant": "did you mean 'const'?", "unique": "did you mean 'uniqueItems'?",
    "requires": "did you mean 'required' or 'dependentRequired'?",
}

# Every applicator and assertion of JSON Schema (2020-12, and the older drafts' forms): the
# post-decode validator (jsonschema, with the schema's own draft) enforces each of them, so
# any one a backend's mask does not enforce is validator-tier for that backend.
JSON_SCHEMA_KEYWORDS = frozenset({
    "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum",
    "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems",
    "uniqueItems", "maxContains", "minContains", "maxProperties", "minProperties", "required",
    "dependentRequired", "allOf", "anyOf", "oneOf", "not", "if", "then", "else",
    "dependentSchemas", "prefixItems", "items", "contains", "properties",
    "patternProperties", "additionalProperties", "propertyNames", "unevaluatedItems",
    "unevaluatedProperties", "$ref", "$defs", "definitions", "format", "additionalItems",
    "dependencies"})

# Formats the validator really checks with what is installed (some need optional packages),
# and OpenAPI 3's data type formats (grammars/formats.py).
VALIDATOR_FORMATS = frozenset(FormatChecker().checkers) | frozenset(OPENAPI_FORMATS)


@functools.lru_cache(maxsize=4096)
def instead(key: str) -> str:
    """A hint for an unknown keyword that looks like a rule: what to write instead. Kept
    by keyword: a schema repeats its own (JsonSchemaStore's service-schema holds 4,674
    unknown keywords; matching each occurrence anew was most of its check's time)."""
    if key in INSTEAD:
        return f" ({INSTEAD[key]})"
    close = difflib.get_close_matches(key, _KNOWN, n=1, cutoff=0.8) \
        or [k for k in _KNOWN if k.lower() == key.lower()]
    return f" (did you mean {close[0]!r}?)" if close else ""


_KNOWN = sorted(JSON_SCHEMA_KEYWORDS | ANNOTATIONS)
