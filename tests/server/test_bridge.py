"""The cold-compile bridge: a schema still compiling in xgrammar is served under
llguidance's mask where both enforce the same keywords, and waits for xgrammar otherwise;
later requests get xgrammar's cached grammar."""

from __future__ import annotations

import asyncio
import threading

import pytest

from grammars import (BRIDGE, BridgedBackend, GrammarCache, JsonSchemaSpec, StructuralTagSpec,
                      is_bridged, make_backend)
from grammars.keywords import XGRAMMAR_KEYWORDS
from server.pipeline.decode import compiled

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                           "age": {"type": "integer", "minimum": 0}},
          "required": ["name", "age"]}
# minProperties: in xgrammar's mask, not in llguidance's (its table puts it elsewhere).
SIZED = {"type": "object", "properties": {"a": {"type": "integer"}}, "minProperties": 1}


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


def test_bridgeable_only_where_both_masks_enforce_the_same(backend):
    assert backend.bridgeable(_spec(PERSON))
    assert not backend.bridgeable(_spec(SIZED))
    uri = {"type": "object", "properties": {"u": {"type": "string", "format": "uri",
                                                  "pattern": "^https://"}}}
    assert not backend.bridgeable(_spec(uri))  # the two masks read this pair differently
    assert not backend.bridgeable(StructuralTagSpec.of({"type": "structural_tag", "format": {
        "type": "const_string", "value": "x"}}))
    bridged = backend.bridge(_spec(PERSON))
    assert bridged is not None and is_bridged(bridged)
    assert backend.accepts(bridged, '{"name":"Ann","age":3}')
    assert not backend.accepts(bridged, '{"name":"Ann","age":-3}')


class _Slow:
    """Holds xgrammar's compile until released, as a slow schema would."""

    def __init__(self, backend: BridgedBackend) -> None:
        self.release = threading.Event()
        self._compile = backend.primary.compile
        backend.primary.compile = self  # type: ignore[method-assign]

    def __call__(self, spec):  # noqa: ANN001, ANN204
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


def test_a_schema_the_bridge_would_not_enforce_the_same_waits(backend):
    slow = _Slow(backend)
    cache = GrammarCache(backend)
    threading.Timer(0.2, slow.release.set).start()
    try:
        lookup = asyncio.run(compiled(cache, _spec(SIZED), timeout_s=10, bridge_wait_s=0.01))
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
