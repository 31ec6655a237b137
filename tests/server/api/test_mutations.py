"""The mutation fuzz tier's generator (mutations.py), without a server: cases are
replayable from the seed, every one can be sent, and mutations reach every kind of place."""

from __future__ import annotations

import json
import random
from collections import Counter

from tests.server.api.mutations import mutate, seeds

SEEDS = seeds("m", max_tokens=4)


def _cases(seed: int, count: int) -> list:
    rng = random.Random(seed)
    return [mutate(SEEDS[i % len(SEEDS)], rng) for i in range(count)]


def test_every_route_and_api_is_seeded_plain_and_streamed():
    paths = Counter(s.path for s in SEEDS)
    assert set(paths) == {"/v1/chat/completions", "/v1/responses", "/v1/messages",
                          "/v1/grammars/compile", "/v1/contracts/reissue_card/validate",
                          "/v1/tools/check_access_request_status/invoke",
                          "/v1/tools/open_urgent_ticket/invoke"}
    streamed = {s.path for s in SEEDS if s.body.get("stream") is True}
    assert streamed == {"/v1/chat/completions", "/v1/responses", "/v1/messages"}


def test_a_run_is_replayed_by_its_seed_and_leaves_the_seeds_alone():
    before = json.dumps([s.body for s in SEEDS])
    first, again = _cases(11, 300), _cases(11, 300)
    assert [c.content() for c in first] == [c.content() for c in again]
    assert [c.content() for c in _cases(12, 50)] != [c.content() for c in first[:50]]
    assert json.dumps([s.body for s in SEEDS]) == before


def test_cases_can_be_sent_and_mutate_in_every_way():
    cases = _cases(5, 2000)
    texts = [c.content() for c in cases]  # none fails to serialize (deep values included)
    assert all(isinstance(t, bytes) for t in texts)
    done = " ".join(m for c in cases for m in c.mutations)
    for kind in ("replace ", "drop ", "add ", "append to ", "header "):
        assert kind in done, kind
    joined = b"\n".join(texts)
    for hostile in (b"\\ud800", b"NaN", b"Infinity", b"-Infinity", b"[{}]", b"null",
                    b"1" + b"0" * 400, b'{"a": ' * 800):
        assert hostile in joined, hostile
    assert max(len(t) for t in texts) > 100_000  # the 100k strings went out
