import dataclasses
import threading

import pytest

from grammars import GrammarCache, JsonSchemaSpec

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}}


class CountingBackend:
    """Wraps the real backend and counts compiles; the fingerprint can be changed."""

    def __init__(self, real, *, fingerprint=None, version=None):
        self._real = real
        self.name = real.name
        self.version = version or real.version
        self.tokenizer_fingerprint = fingerprint or real.tokenizer_fingerprint
        self.options_key = real.options_key
        self.compiles = 0
        self._lock = threading.Lock()

    def compile(self, spec):
        with self._lock:
            self.compiles += 1
        return self._real.compile(spec)


def test_miss_then_hit(backend):
    counting = CountingBackend(backend)
    cache = GrammarCache(counting)
    first = cache.get(JsonSchemaSpec.from_schema(SCHEMA))
    second = cache.get(JsonSchemaSpec.from_schema(SCHEMA))
    assert (first.hit, second.hit) == (False, True)
    assert second.grammar is first.grammar
    assert counting.compiles == 1
    assert dataclasses.astuple(cache.stats()) == (1, 1, 0, 1)


def test_equivalent_key_order_hits(backend):
    cache = GrammarCache(CountingBackend(backend))
    cache.get(JsonSchemaSpec.from_schema({"type": "object", "maxProperties": 3}))
    assert cache.get(JsonSchemaSpec.from_schema({"maxProperties": 3, "type": "object"})).hit


@pytest.mark.parametrize("changed", [
    {"type": "object", "properties": {"a": {"type": "string"}}},
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {}}},
])
def test_schema_change_misses(backend, changed):
    cache = GrammarCache(CountingBackend(backend))
    cache.get(JsonSchemaSpec.from_schema(SCHEMA))
    assert not cache.get(JsonSchemaSpec.from_schema(changed)).hit


def test_key_includes_tokenizer_and_backend_version(backend):
    spec = JsonSchemaSpec.from_schema(SCHEMA)
    base = GrammarCache(CountingBackend(backend)).key_for(spec)
    other_tok = GrammarCache(CountingBackend(backend, fingerprint="other")).key_for(spec)
    other_ver = GrammarCache(CountingBackend(backend, version="9.9.9")).key_for(spec)
    assert len({base, other_tok, other_ver}) == 3
    assert base.backend_version == backend.version


def test_lru_evicts_least_recently_used(backend):
    cache = GrammarCache(CountingBackend(backend), max_entries=2)
    specs = [JsonSchemaSpec.from_schema({"type": "integer", "maximum": i}) for i in range(3)]
    cache.get(specs[0])
    cache.get(specs[1])
    cache.get(specs[0])          # 0 is now the most recent
    cache.get(specs[2])          # evicts 1
    assert cache.get(specs[0]).hit
    assert not cache.get(specs[1]).hit
    assert cache.stats().evictions == 2
    assert cache.stats().entries == 2


def test_max_entries_must_be_positive(backend):
    with pytest.raises(ValueError, match="max_entries"):
        GrammarCache(backend, max_entries=0)
