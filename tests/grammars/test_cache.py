import dataclasses
import json
import threading

import pytest

from grammars import GrammarBackend, GrammarCache, JsonSchemaSpec
from grammars.keywords import XGRAMMAR_KEYWORDS

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}}


class CountingBackend(GrammarBackend):
    """Wraps the real backend and counts compiles; the fingerprint can be changed."""

    def __init__(self, real, *, fingerprint=None, version=None):
        self._real = real
        self.name = real.name
        self.version = version or real.version
        self.tokenizer_fingerprint = fingerprint or real.tokenizer_fingerprint
        self.keywords = real.keywords
        self.persistent = real.persistent
        self.serialize, self.deserialize = real.serialize, real.deserialize
        self.compiles = 0
        self._lock = threading.Lock()

    @property
    def options_key(self):
        return self._real.options_key

    def compile(self, spec):
        with self._lock:
            self.compiles += 1
        return self._real.compile(spec)


def test_miss_then_hit(backend):
    counting = CountingBackend(backend)
    cache = GrammarCache(counting)
    first = cache.get(_spec(SCHEMA))
    second = cache.get(_spec(SCHEMA))
    assert (first.hit, second.hit) == (False, True)
    assert second.grammar is first.grammar
    assert counting.compiles == 1
    stats = cache.stats()
    assert dataclasses.astuple(stats)[:6] == (1, 1, 0, 1, 1, 0)
    assert stats.bytes == first.grammar.size_bytes > 0


def test_equivalent_key_order_hits(backend):
    cache = GrammarCache(CountingBackend(backend))
    cache.get(_spec({"type": "object", "maxProperties": 3}))
    assert cache.get(_spec({"maxProperties": 3, "type": "object"})).hit


@pytest.mark.parametrize("changed", [
    {"type": "object", "properties": {"a": {"type": "string"}}},
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {}}},
])
def test_schema_change_misses(backend, changed):
    cache = GrammarCache(CountingBackend(backend))
    cache.get(_spec(SCHEMA))
    assert not cache.get(_spec(changed)).hit


def test_key_includes_tokenizer_and_backend_version(backend):
    spec = _spec(SCHEMA)
    base = GrammarCache(CountingBackend(backend)).key_for(spec)
    other_tok = GrammarCache(CountingBackend(backend, fingerprint="other")).key_for(spec)
    other_ver = GrammarCache(CountingBackend(backend, version="9.9.9")).key_for(spec)
    assert len({base, other_tok, other_ver}) == 3
    assert base.backend_version == backend.version


def test_lru_evicts_least_recently_used(backend):
    cache = GrammarCache(CountingBackend(backend), max_entries=2)
    specs = [_spec({"type": "integer", "maximum": i}) for i in range(3)]
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


class SlowBackend(CountingBackend):
    """Compiles only when released, to hold a compilation in flight."""

    def __init__(self, real):
        super().__init__(real)
        self.release = threading.Event()

    def compile(self, spec):
        self.release.wait(timeout=30)
        return super().compile(spec)


def test_concurrent_misses_compile_once(backend):
    slow = SlowBackend(backend)
    cache = GrammarCache(slow)
    spec = _spec(SCHEMA)
    futures = [cache.submit(_spec(SCHEMA)) for _ in range(8)]
    slow.release.set()
    lookups = [f.result(timeout=30) for f in futures]
    assert slow.compiles == 1
    assert len({id(lk.grammar) for lk in lookups}) == 1
    stats = cache.stats()
    assert (stats.compiles, stats.joined, stats.misses) == (1, 7, 8)
    assert cache.get(spec).hit


def test_a_slow_compile_does_not_block_hits_or_other_compiles(backend):
    slow = SlowBackend(backend)
    cache = GrammarCache(slow, compile_workers=2)
    fast_spec = _spec({"type": "integer"})
    slow.release.set()
    cache.get(fast_spec)  # cached
    slow.release.clear()
    stuck = cache.submit(_spec(SCHEMA))
    # A hit never waits on a compile: it is answered while the slow one is still held (the
    # timeout is a bound for a broken build, not a claim about speed).
    assert cache.submit(fast_spec).result(timeout=30).hit
    assert not stuck.done()
    slow.release.set()
    assert not stuck.result(timeout=30).hit


def test_failed_compile_is_not_cached(backend):
    from grammars import InvalidSchemaError

    cache = GrammarCache(CountingBackend(backend))
    bad = _spec({"properties": {"a": {"$ref": "#/$defs/Nope"}}})
    for _ in range(2):
        with pytest.raises(InvalidSchemaError):
            cache.get(bad)
    assert cache.stats().compiles == 2 and cache.stats().entries == 0


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _spec(schema):
    return JsonSchemaSpec.from_schema(schema, table=XGRAMMAR_KEYWORDS)


def _specs(n):
    return [_spec({"type": "integer", "minimum": i}) for i in range(n)]


def test_byte_bound_evicts_least_recently_used(backend):
    a, b, c = _specs(3)
    sa, sb, sc = (backend.compile(s).size_bytes for s in (a, b, c))
    bound = max(sa + sb, sa + sc)  # any two fit, not three
    assert bound < sa + sb + sc
    cache = GrammarCache(CountingBackend(backend), max_bytes=bound)
    cache.get(a)
    cache.get(b)
    cache.get(a)  # a is now the most recently used
    cache.get(c)  # over the bound: b goes
    stats = cache.stats()
    assert (stats.entries, stats.evictions) == (2, 1)
    assert stats.bytes == sa + sc
    assert cache.get(a).hit and not cache.get(b).hit


def test_entries_expire_after_the_ttl_unused(backend):
    clock = Clock()
    counting = CountingBackend(backend)
    cache = GrammarCache(counting, ttl_s=60, clock=clock)
    a, b = _specs(2)
    cache.get(a)
    cache.get(b)
    clock.now = 50
    assert cache.get(a).hit  # used again: its clock restarts
    clock.now = 100
    assert cache.get(a).hit  # 50 s since last use
    assert not cache.get(b).hit  # 100 s unused: expired, compiled again
    stats = cache.stats()
    assert stats.expired == 1 and counting.compiles == 3


def test_disk_store_makes_a_restart_warm(backend, tmp_path):
    from grammars.diskstore import DiskStore

    spec = _spec({"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 20}}, "required": ["name"]})
    first = CountingBackend(backend)
    GrammarCache(first, disk=DiskStore(tmp_path)).get(spec)
    assert first.compiles == 1 and len(list(tmp_path.glob("*.json"))) == 1

    restarted = CountingBackend(backend)  # a new process: empty memory, same directory
    cache = GrammarCache(restarted, disk=DiskStore(tmp_path))
    lookup = cache.get(spec)
    assert restarted.compiles == 0 and cache.stats().disk_loads == 1
    assert not lookup.hit  # a miss in memory, answered from disk
    assert backend.accepts(lookup.grammar, '{"name":"Ada"}')
    assert not backend.accepts(lookup.grammar, '{"name":"' + "x" * 21 + '"}')
    assert cache.get(spec).hit


def test_a_conversations_grammar_and_a_huge_one_stay_off_the_disk(backend, tmp_path,
                                                                   monkeypatch):
    """A grammar narrowed to one conversation's values serves that conversation only, and
    a big one's JSON is many times its memory (BFCL's TravelAPI with 44 grounded strings:
    a 75 MiB grammar took 12 GiB to write): neither is written to the disk store."""
    from grammars import cache as cache_module
    from grammars.diskstore import DiskStore

    cache = GrammarCache(CountingBackend(backend), disk=DiskStore(tmp_path))
    cache.submit(_spec(SCHEMA), persist=False).result()
    assert list(tmp_path.glob("*.json")) == []
    monkeypatch.setattr(cache_module, "MAX_DISK_GRAMMAR_BYTES", 1)
    cache.get(_spec({"type": "object", "properties": {"x": {"type": "integer"}}}))
    assert list(tmp_path.glob("*.json")) == []
    monkeypatch.setattr(cache_module, "MAX_DISK_GRAMMAR_BYTES", 2**30)
    cache.get(_spec({"type": "object", "properties": {"y": {"type": "integer"}}}))
    assert len(list(tmp_path.glob("*.json"))) == 1


def test_disk_store_ignores_other_tokenizers_and_bad_files(backend, tmp_path):
    from grammars.diskstore import DiskStore

    spec = _spec(SCHEMA)
    GrammarCache(CountingBackend(backend), disk=DiskStore(tmp_path)).get(spec)
    other = CountingBackend(backend, fingerprint="another-tokenizer")
    GrammarCache(other, disk=DiskStore(tmp_path)).get(spec)
    assert other.compiles == 1  # keyed by tokenizer: not loaded for another one

    (path,) = [p for p in tmp_path.glob("*.json")
               if DiskStore(tmp_path).path_for(GrammarCache(CountingBackend(backend)).key_for(
                   spec)) == p]
    path.write_text("{not json")
    store = DiskStore(tmp_path)
    again = CountingBackend(backend)
    assert not GrammarCache(again, disk=store).get(spec).hit
    assert again.compiles == 1 and store.bad_files == 1  # dropped, compiled, rewritten
    assert DiskStore(tmp_path).load(GrammarCache(again).key_for(spec)) is not None


def _stored_path(backend, directory):
    from grammars.diskstore import DiskStore

    return DiskStore(directory).path_for(GrammarCache(CountingBackend(backend)).key_for(
        _spec(SCHEMA)))


@pytest.mark.parametrize("corrupt", [
    lambda text: text[: len(text) // 2],                      # truncated mid-write
    lambda text: "\udcff garbage",                          # not even JSON
    lambda text: "[1, 2]",                                   # JSON, not a record
    lambda text: text.replace('"grammar"', '"grammer"'),     # record without its grammar
    lambda text: json.dumps({**json.loads(text), "grammar": "not a grammar"}),  # won't load
], ids=["truncated", "garbage", "list", "no-grammar", "bad-grammar"])
def test_a_corrupt_store_file_is_discarded_and_the_grammar_compiled(backend, tmp_path, corrupt,
                                                                     caplog):
    from grammars.diskstore import DiskStore

    spec = _spec(SCHEMA)
    GrammarCache(CountingBackend(backend), disk=DiskStore(tmp_path)).get(spec)
    path = _stored_path(backend, tmp_path)
    path.write_text(corrupt(path.read_text(encoding="utf-8")), encoding="utf-8",
                    errors="surrogateescape")
    store, again = DiskStore(tmp_path), CountingBackend(backend)
    lookup = GrammarCache(again, disk=store).get(spec)
    assert again.compiles == 1 and store.bad_files == 1
    assert backend.accepts(lookup.grammar, '{"a":1}')
    assert "dropping cached grammar" in caplog.text
    assert DiskStore(tmp_path).load(GrammarCache(again).key_for(spec)) is not None  # rewritten


def test_an_unusable_cache_dir_is_logged_and_bypassed(backend, tmp_path, caplog):
    from grammars.diskstore import DiskStore

    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory should be")  # fails even for root
    store = DiskStore(blocker / "grammars")  # no exception: startup goes on
    counting = CountingBackend(backend)
    cache = GrammarCache(counting, disk=store)
    first = cache.get(_spec(SCHEMA))
    assert counting.compiles == 1 and backend.accepts(first.grammar, '{"a":1}')
    assert cache.get(_spec(SCHEMA)).hit  # the memory cache still works
    assert "grammar disk cache" in caplog.text and "could not store" in caplog.text


def test_disk_store_is_bounded_least_recently_used_first(tmp_path):
    """Schemas sent once cannot fill the disk: past max_bytes, the files used least
    recently go (a load counts as a use)."""
    import os

    from grammars import DiskStore

    @dataclasses.dataclass(frozen=True)
    class Key:
        name: str

    store = DiskStore(tmp_path, max_bytes=10_000)
    grammar = "x" * 1_500
    for i in range(4):
        store.save(Key(f"k{i}"), grammar)
        os.utime(store.path_for(Key(f"k{i}")), (1_000 + i, 1_000 + i))  # k0 oldest
    assert store.load(Key("k0")) == grammar  # used now: the newest
    for i in range(4, 8):
        store.save(Key(f"k{i}"), grammar)
    kept = {k for k in (f"k{i}" for i in range(8)) if store.path_for(Key(k)).exists()}
    total = sum(p.stat().st_size for p in tmp_path.glob("*.json"))
    assert total <= 10_000 and store.evicted >= 1
    assert "k0" in kept and "k7" in kept and "k1" not in kept
