"""PrefixCache's bookkeeping (the torch engine's prefix reuse), on small tensors."""

from __future__ import annotations

import torch

from server.engines.prefix_cache import PrefixCache


def layers(n: int, *, fill: float = 0.0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    k = torch.full((1, 2, n, 4), fill)
    return [(k, k.clone()) for _ in range(3)]  # 3 layers, 2 heads, 4 dims: 192 bytes/token


def test_the_longest_shared_prefix_is_found_and_sliced():
    cache = PrefixCache(10**6, min_tokens=4)
    cache.store(tuple(range(20)), layers(20, fill=1.0))
    cache.store((0, 1, 2, 3, 4, 5, 99, 98), layers(8, fill=2.0))
    hit = cache.lookup((*range(12), 500, 501))
    assert hit is not None and hit.tokens == 12
    assert hit.layers[0][0].shape[2] == 12 and float(hit.layers[0][0][0, 0, 0, 0]) == 1.0


def test_a_whole_cached_prompt_leaves_its_last_token_to_compute():
    cache = PrefixCache(10**6, min_tokens=4)
    cache.store(tuple(range(10)), layers(10))
    assert cache.lookup(tuple(range(10))).tokens == 9  # its logits must be computed


def test_short_or_unrelated_prefixes_are_not_reused():
    cache = PrefixCache(10**6, min_tokens=8)
    cache.store(tuple(range(20)), layers(20))
    assert cache.lookup((0, 1, 2, 3, 9, 9, 9, 9, 9, 9)) is None  # 4 shared < 8
    assert cache.lookup(tuple(range(100, 130))) is None


def test_a_prompt_drops_the_entries_it_extends_and_bytes_bound_the_rest():
    per_token = 3 * 2 * (2 * 4 * 4)  # layers x (K, V) x heads x dims x float32
    cache = PrefixCache(per_token * 50, min_tokens=4)
    cache.store(tuple(range(10)), layers(10))
    cache.store(tuple(range(20)), layers(20))  # extends the first: replaces it
    assert len(cache) == 1 and cache.size_bytes == 20 * per_token
    cache.store(tuple(range(100, 130)), layers(30))
    assert len(cache) == 2 and cache.size_bytes == 50 * per_token
    cache.store(tuple(range(200, 210)), layers(10))  # over the bound: the oldest goes
    assert cache.lookup(tuple(range(21))) is None
    assert cache.size_bytes <= 50 * per_token


def test_a_zero_budget_turns_it_off():
    cache = PrefixCache(0)
    cache.store(tuple(range(100)), layers(100))
    assert len(cache) == 0 and cache.lookup(tuple(range(100))) is None
