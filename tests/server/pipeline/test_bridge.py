"""The cold-compile bridge: a schema still compiling in xgrammar is served under
llguidance's mask, with what that mask leaves to the validator reported so; it waits for
xgrammar where llguidance cannot serve it; later requests get xgrammar's cached grammar."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from fastapi.testclient import TestClient

from grammars import (
    BRIDGE,
    BridgedBackend,
    GrammarCache,
    InvalidSchemaError,
    JsonSchemaSpec,
    StructuralTagSpec,
    ToolCallsSpec,
    ToolSpec,
    bridge_demoted,
    is_bridged,
    loosening,
    make_backend,
    reported,
)
from grammars._walk import iter_schema_nodes
from grammars.keywords import XGRAMMAR_KEYWORDS, analyze
from server.api.app import create_app
from server.engines.scripted import ScriptedEngine
from server.pipeline.decode import compiled
from server.settings import Settings

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                           "age": {"type": "integer", "minimum": 0}},
          "required": ["name", "age"]}
# minProperties: in xgrammar's mask, left to the validator by llguidance's.
SIZED = {"type": "object", "properties": {"a": {"type": "integer"}}, "minProperties": 1}
URI = {"type": "object", "properties": {"u": {"type": "string", "format": "uri",
                                              "pattern": "^https://.+$"}}}
# llguidance's compiler refuses a `$` inside the pattern ("lookarounds not supported yet");
# xgrammar's compiles it: bridged without it.
INNER_END = {"type": "object", "properties": {"w": {"type": "string", "pattern": r"^(a(,|$))+$"}}}
# Structural tags are xgrammar's alone: never bridged.
TAG = StructuralTagSpec.of({"type": "structural_tag", "format": {"type": "const_string",
                                                                 "value": "x"}})
# A tree whose entries are strings or subtrees, each entry's `type` listing every type.
_ENTRY = {"anyOf": [{"type": "string"}, {"$ref": "#/definitions/tree"}],
          "type": ["object", "array", "string", "number", "boolean", "null"]}
TREE = {"type": "object", "additionalProperties": _ENTRY, "definitions": {
    "tree": {"type": "object", "additionalProperties": _ENTRY}}}


@pytest.fixture()
def backend(tokenizer) -> BridgedBackend:
    made = make_backend(BRIDGE, tokenizer, vocab_size=len(tokenizer),
                        stop_token_ids=[tokenizer.eos_token_id])
    assert isinstance(made, BridgedBackend)
    return made


def _spec(schema) -> JsonSchemaSpec:
    return JsonSchemaSpec.from_schema(schema, table=XGRAMMAR_KEYWORDS)


def test_it_is_xgrammar_for_the_cache(backend):
    assert backend.name == "xgrammar" and backend.keywords.backend == "xgrammar"
    compiled_ = backend.compile(_spec(PERSON))
    assert not is_bridged(compiled_)


def test_bridgeable_where_llguidance_serves_the_schema(backend):
    assert backend.bridge(_spec(SIZED)) is not None
    assert backend.bridge(TAG) is None
    bridged = backend.bridge(_spec(PERSON))
    assert bridged is not None and is_bridged(bridged)
    assert backend.accepts(bridged, '{"name":"Ann","age":3}')
    assert not backend.accepts(bridged, '{"name":"Ann","age":-3}')


def test_what_the_bridged_mask_leaves_to_the_validator_is_reported_so(backend):
    report = analyze(SIZED, XGRAMMAR_KEYWORDS).report
    assert [u.tier for u in report.uses if u.keyword == "minProperties"] == ["grammar"]
    bridged = backend.bridge(_spec(SIZED))
    assert bridged is not None
    assert backend.accepts(bridged, "{}")  # llguidance's mask lets it through ...
    assert not backend.accepts(backend.compile(_spec(SIZED)), "{}")  # ... xgrammar's did not
    moved = [u for u in reported(bridged, report).uses if u.keyword == "minProperties"]
    assert [(u.pointer, u.tier) for u in moved] == [("/minProperties", "validator")]
    assert "bridge" in moved[0].note
    assert reported(backend.compile(_spec(SIZED)), report) is report  # xgrammar's: unchanged
    assert reported(backend.bridge(_spec(PERSON)), report) is report  # nothing left out


def test_a_pattern_beside_a_format_is_the_validators_and_the_bridge_follows_the_format(
        backend):
    # xgrammar's mask follows the format alone; llguidance's would intersect the pattern
    # (which, read as a whole match, refused xAPI's valid `mailto:` addresses). The keyword
    # layer leaves such a pattern to the validator, so both masks follow the format.
    mailto = {"type": "object", "properties": {"m": {
        "type": "string", "format": "uri", "pattern": "^mailto:"}}}
    tiers = {(u.pointer, u.keyword): u.tier
             for u in analyze(mailto, XGRAMMAR_KEYWORDS).report.uses}
    assert tiers[("/properties/m/pattern", "pattern")] == "validator"
    for schema in (URI, mailto):
        spec = _spec(schema)
        bridged, primary = backend.bridge(spec), backend.primary.compile(spec)
        assert bridged is not None and is_bridged(bridged)
        for text in ('{"m":"mailto:a@b.co"}', '{"u":"https://a.b/c"}', '{"m":"not a uri"}',
                     '{"u":"http://a.b"}'):
            assert backend.accepts(bridged, text) == backend.accepts(primary, text), text


def test_a_pattern_llguidance_cannot_run_is_the_validators_on_the_bridge(backend):
    # llguidance reads the end anchor inside the group as a lookaround and refuses the
    # schema; RE2 and xgrammar run it. Bridged without it, reported as the validator's.
    bridged = backend.bridge(_spec(INNER_END))
    assert bridged is not None and is_bridged(bridged)
    assert backend.accepts(bridged, '{"w":"b"}')  # the bridged mask lets it through ...
    assert not backend.accepts(backend.compile(_spec(INNER_END)), '{"w":"b"}')  # xgrammar's not
    assert backend.accepts(bridged, '{"w":"a,a"}')
    report = analyze(INNER_END, XGRAMMAR_KEYWORDS).report
    moved = [u for u in reported(bridged, report).uses if u.keyword == "pattern"]
    assert [(u.pointer, u.tier) for u in moved] == [("/properties/w/pattern", "validator")]
    error = InvalidSchemaError("the grammar backend rejected the schema: lookarounds not "
                               "supported yet; End in regex /^(?:^(a(,|$))+$)$/. Simplify.")
    assert loosening._unread_pattern(error) == loosening.PATTERN + "^(a(,|$))+$"
    assert loosening._unread_pattern(InvalidSchemaError("incompatible types")) is None


def test_a_recursive_union_beside_vacuous_keywords_is_bridged(backend):
    # llguidance refuses to intersect the recursive $ref with the `type` listing every type
    # ("circular references with sibling keys"); that `type` allows anything: left out.
    bridged = backend.bridge(_spec(TREE))
    assert bridged is not None and is_bridged(bridged)
    assert not {"type", "anyOf", "$ref"} & {u.keyword for u in bridge_demoted(bridged)}
    assert backend.accepts(bridged, '{"a":{"b":"x","c":{}}}')
    assert not backend.accepts(bridged, '{"a":{"b":1}}')



# JsonSchemaStore's Discord webhook: an open-ended pattern beside a `$ref`.
WEBHOOK = {"type": "object", "properties": {"avatar_url": {"$ref": "#/definitions/url"}},
           "definitions": {"string": {"type": "string"},
                           "url": {"$ref": "#/definitions/string", "pattern": "^https?://"}}}


def test_keywords_beside_a_ref_are_the_validators_as_in_xgrammars_mask(backend):
    """xgrammar's mask follows a `$ref` and ignores what stands beside it; llguidance's
    would intersect the two and, reading the pattern as a whole match, refuse valid URLs.
    The bridge takes them off and reports them for the validator: never stricter than
    xgrammar's mask, where a valid value refused is a harm no check after decoding undoes."""
    valid = '{"avatar_url":"https://example.com/avatar.png"}'
    spec = _spec(WEBHOOK)
    assert backend.accepts(backend.primary.compile(spec), valid)  # xgrammar's mask
    tiers = {(u.pointer, u.keyword): u.tier
             for u in analyze(WEBHOOK, XGRAMMAR_KEYWORDS).report.uses}
    assert tiers[("/definitions/url/pattern", "pattern")] == "validator"
    bridged = backend.bridge(spec)
    assert bridged is not None and is_bridged(bridged)
    assert backend.accepts(bridged, valid)
    assert not backend.accepts(bridged, '{"avatar_url":1}')  # the `$ref`'s target holds
    # Whatever else stands beside a `$ref` in the schema the bridge reads is taken off too,
    # and said so.
    schema = {"definitions": {"s": {"type": "string"}},
              "properties": {"u": {"$ref": "#/definitions/s", "maxLength": 3,
                                   "type": ["string", "null"]}}}
    nodes = list(iter_schema_nodes(schema))
    assert sorted(loosening._beside_refs_out(nodes, loosening._ref_prefixes(nodes))) == [
        "/properties/u/maxLength", "/properties/u/type"]
    assert schema["properties"]["u"] == {"$ref": "#/definitions/s"}

# Github_hard's Atom feed: a `rel` whose `type` (object) shares no value with its oneOf's
# branches (strings): no value can be written there, but the property is optional.
ATOM = {"type": "object", "properties": {"rel": {"$ref": "#/definitions/rel"},
                                         "href": {"type": "string"}},
        "required": ["href"],
        "definitions": {"rel": {"type": "object", "oneOf": [
            {"enum": ["alternate", "self"]}, {"type": "string", "minLength": 1}]}}}


def test_a_type_no_union_branch_shares_is_read_as_xgrammars_mask_reads_it(backend):
    """llguidance refuses the whole schema ("incompatible types"); xgrammar's mask takes the
    union's branches and ignores the `type` beside them. The bridge compiles again without
    such `type`s, reported for the validator, and agrees with xgrammar's mask."""
    spec = _spec(ATOM)
    bridged = backend.bridge(spec)
    assert bridged is not None and is_bridged(bridged)
    assert ("/definitions/rel/type", "type") in {
        (u.pointer, u.keyword) for u in bridge_demoted(bridged)}
    primary = backend.primary.compile(spec)
    for text in ('{"href":"x"}', '{"rel":"self","href":"x"}', '{"rel":1,"href":"x"}'):
        assert backend.accepts(bridged, text) == backend.accepts(primary, text), text


def test_keywords_beside_a_recursive_ref_are_left_out_and_reported():
    schema = {"definitions": {"c": {"type": "object", "oneOf": [
        {"$ref": "#/definitions/c", "minProperties": 1}, {"type": "string"}]}},
        "$ref": "#/definitions/c", "description": "kept"}
    loosened, dropped = loosening._ref_siblings_out(schema, frozenset({"/definitions/c"}))
    assert loosened["definitions"]["c"] == {"oneOf": [{"$ref": "#/definitions/c"},
                                                      {"type": "string"}]}
    assert loosened["$ref"] == "#/definitions/c" and "description" not in loosened
    assert sorted(dropped) == ["/definitions/c/oneOf/0/minProperties",
                               "/definitions/c/type", "/description"]
    assert schema["definitions"]["c"]["type"] == "object"  # a copy: the spec's is untouched
    error = InvalidSchemaError("the grammar backend rejected the schema: circular references "
                               "with sibling keys are not supported: "
                               "https://x.org/s.json#/definitions/c")
    assert loosening._circular_ref(error) == "/definitions/c"
    assert loosening._circular_ref(InvalidSchemaError("incompatible types")) is None


def test_the_bridge_reads_the_grammar_schema_without_the_metaschema(backend, monkeypatch):
    spec = _spec(PERSON)  # checked once, as a request's schema is

    def refuse(*args, **kwargs):
        raise AssertionError("the bridge checked the metaschema again")

    monkeypatch.setattr("grammars.specs.check_metaschema", refuse)
    assert backend.bridge(spec) is not None


def test_a_tools_demoted_keywords_carry_its_name(backend):
    tool = ToolSpec.from_parameters("count", SIZED, table=XGRAMMAR_KEYWORDS)
    report = analyze(SIZED, XGRAMMAR_KEYWORDS).report.prefixed("count#")
    bridged = backend.bridge(ToolCallsSpec((tool,)))
    assert bridged is not None and is_bridged(bridged)
    moved = [u for u in reported(bridged, report).uses if u.keyword == "minProperties"]
    assert [(u.pointer, u.tier) for u in moved] == [("count#/minProperties", "validator")]


class _Slow:
    """Holds xgrammar's compile until released, as a slow schema would."""

    def __init__(self, backend: BridgedBackend) -> None:
        self.release = threading.Event()
        self._compile = backend.primary.compile
        backend.primary.compile = self  # type: ignore[method-assign]  # the test stands in for it

    def __call__(self, spec):
        self.release.wait(10)
        return self._compile(spec)


def test_a_slow_compile_is_bridged_then_xgrammar_serves(backend):
    slow = _Slow(backend)
    cache = GrammarCache(backend)

    async def ask(schema):
        return await compiled(cache, _spec(schema), timeout_s=10, bridge_wait_s=0.01)

    try:
        first = asyncio.run(ask(PERSON))
        assert is_bridged(first.grammar) and not first.hit
        assert backend.accepts(first.grammar, '{"name":"A","age":1}')
        slow.release.set()
        later = cache.get(_spec(PERSON))  # xgrammar's, once compiled
        assert not is_bridged(later.grammar)
        assert asyncio.run(ask(PERSON)).hit
    finally:
        slow.release.set()
        cache.close()


def test_a_schema_the_bridge_does_not_serve_waits(backend):
    slow = _Slow(backend)
    cache = GrammarCache(backend)
    threading.Timer(0.2, slow.release.set).start()
    try:
        lookup = asyncio.run(compiled(cache, TAG, timeout_s=10, bridge_wait_s=0.01))
        assert not is_bridged(lookup.grammar)
    finally:
        slow.release.set()
        cache.close()


def test_the_bridge_starts_with_the_miss_not_after_the_wait(backend, monkeypatch):
    """A large schema's first mask waits for the longer of xgrammar's wait and the bridge's
    compile, not their sum: the bridge is already compiling while the miss waits."""
    slow = _Slow(backend)
    cache = GrammarCache(backend)
    bridge_started = threading.Event()
    bridge = backend.bridge

    def watched(spec):
        bridge_started.set()
        return bridge(spec)

    monkeypatch.setattr(backend, "bridge", watched)

    async def ask():
        asked = asyncio.ensure_future(compiled(cache, _spec(PERSON), timeout_s=10,
                                               bridge_wait_s=5.0))
        # Well inside the 5 s wait, the bridge is compiling already.
        assert await asyncio.to_thread(bridge_started.wait, 4.0)
        assert not asked.done()  # xgrammar is held and the wait is not over: nothing yet
        slow.release.set()  # xgrammar ends within the wait: its grammar, the bridge's dropped
        return await asked

    try:
        lookup = asyncio.run(ask())
        assert not is_bridged(lookup.grammar)
    finally:
        slow.release.set()
        cache.close()


def test_bridged_mask_decodes_on_the_scripted_engine(model_dir):
    from server.engines.base import GenerationRequest, SamplingParams
    from server.engines.scripted import ScriptedEngine

    engine = ScriptedEngine(model_dir, lambda prompt: '{"name":"Bo","age":7}',
                            grammar_backend=BRIDGE)
    bridged = engine.grammar_backend.bridge(_spec(PERSON))
    ids = engine.encode("hi")
    result = asyncio.run(engine.generate(GenerationRequest(
        ids, SamplingParams(max_tokens=40), bridged)))
    assert result.text == '{"name":"Bo","age":7}' and result.grammar_complete


def test_a_bridged_request_over_http_says_so_and_is_validated(model_dir):
    """Through the API: the first request is bridged and its enforcement header names what
    went to the validator; the validator still refuses what llguidance's mask let through."""
    answers = iter(['{"a":1}', "{}", "{}", "{}", "{}"])
    engine = ScriptedEngine(model_dir, lambda prompt: next(answers), grammar_backend=BRIDGE)
    slow = _Slow(engine.grammar_backend)
    body = {"model": "scripted", "messages": [{"role": "user", "content": "a?"}],
            "response_format": {"type": "json_schema",
                                "json_schema": {"name": "sized", "schema": SIZED}}}
    try:
        with TestClient(create_app(Settings(served_model_name="scripted"),
                                   lambda s: engine)) as client:
            first = client.post("/v1/chat/completions", json=body)
            assert first.status_code == 200, first.text
            assert first.headers["X-StrictCall-Grammar-Cache"] == "bridged"
            assert "validator: minProperties@/minProperties" in \
                first.headers["X-StrictCall-Enforcement"]
            assert json.loads(first.json()["choices"][0]["message"]["content"]) == {"a": 1}
            second = client.post("/v1/chat/completions", json={
                **body, "response_format": {"type": "json_schema", "json_schema": {
                    "name": "other", "schema": {**SIZED, "title": "other"}}}})
            assert second.status_code == 422, second.text  # "{}": refused, not passed
            slow.release.set()
    finally:
        slow.release.set()


def test_a_seeded_request_waits_for_xgrammar_so_its_seed_gives_one_answer(model_dir):
    """The bridge's mask may allow other tokens than xgrammar's (a bound left to the
    validator), so a seeded sample on a cold schema differed from the same request warm (the
    live test of the llama.cpp server saw it under load). A request with a seed waits for
    xgrammar; one without is bridged."""
    engine = ScriptedEngine(model_dir, lambda prompt: '{"a":1}', grammar_backend=BRIDGE)
    slow = _Slow(engine.grammar_backend)
    def body(name: str, **extra):
        return {"model": "scripted", "messages": [{"role": "user", "content": "a?"}],
                "response_format": {"type": "json_schema", "json_schema": {
                    "name": name, "schema": {**SIZED, "title": name}}}, **extra}
    try:
        with TestClient(create_app(Settings(served_model_name="scripted"),
                                   lambda s: engine)) as client:
            unseeded = client.post("/v1/chat/completions", json=body("unseeded"))
            assert unseeded.headers["X-StrictCall-Grammar-Cache"] == "bridged"
            threading.Timer(0.3, slow.release.set).start()
            seeded = client.post("/v1/chat/completions",
                                 json=body("seeded", seed=7, temperature=1.0))
            assert seeded.status_code == 200, seeded.text
            assert seeded.headers["X-StrictCall-Grammar-Cache"] == "miss"
    finally:
        slow.release.set()


def _long(n: int) -> dict:
    """An object of `n` described properties: its grammar schema is about 90 n bytes long."""
    return {"type": "object", "properties": {
        f"field_{i}": {"type": "string", "description": "a field " * 5} for i in range(n)}}


def test_a_long_schema_is_bridged_first_and_compiled_after(backend, monkeypatch):
    """Side by side on two cores, the bridge and xgrammar slowed each other (25 to 45 ms on a
    Kubernetes schema): a long schema's compile starts when its bridge has ended; a short
    one's with the miss, as before."""
    from grammars import bridge_first

    order: list[str] = []
    compile_, bridge = backend.primary.compile, backend.bridge
    compiling_started = threading.Event()

    def compiling(spec):
        order.append("xgrammar")
        compiling_started.set()
        return compile_(spec)

    def bridging(spec):
        order.append("bridge started")
        if not bridge_first(spec):  # beside the compile: it has started, or starts now
            assert compiling_started.wait(5)
        found = bridge(spec)
        order.append("bridge ended")
        return found

    monkeypatch.setattr(backend.primary, "compile", compiling)
    monkeypatch.setattr(backend, "bridge", bridging)
    long_spec = JsonSchemaSpec(json.dumps(_long(700)))
    assert bridge_first(long_spec) and not bridge_first(_spec(PERSON))
    cache = GrammarCache(backend)
    try:
        lookup = asyncio.run(compiled(cache, long_spec, timeout_s=30, bridge_wait_s=0.025))
        assert is_bridged(lookup.grammar)
        assert not is_bridged(cache.get(long_spec).grammar)  # xgrammar's, after
        assert order == ["bridge started", "bridge ended", "xgrammar"]
        order.clear()
        asyncio.run(compiled(cache, long_spec, timeout_s=30, bridge_wait_s=0.025))
        assert order == []  # a hit: neither runs
        compiling_started.clear()
        asyncio.run(compiled(cache, _spec(PERSON), timeout_s=30, bridge_wait_s=5.0))
        # A short schema: xgrammar starts with the miss, not after the bridge.
        assert order.index("xgrammar") < order.index("bridge ended")
    finally:
        cache.close()
