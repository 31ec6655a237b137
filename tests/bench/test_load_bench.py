"""`strictcall-bench load`'s counting (bench/speed/load_tally.py) without a server: every request
in exactly one category, and duplicates found by request id and by completion id."""

from __future__ import annotations

import pytest

from bench.speed.load_tally import CATEGORIES, Outcome, Tally, classify, percentile, table


def _o(**kw) -> Outcome:
    kw.setdefault("sent_id", "r1")
    kw.setdefault("echoed_id", kw["sent_id"] if kw.get("status") else None)
    return Outcome(kind=kw.pop("kind", "tool"), **kw)


@pytest.mark.parametrize(("outcome", "category"), [
    (_o(status=200, complete=True), "answered"),
    (_o(status=200, complete=False), "lost"),  # a stream cut before [DONE]
    (_o(), "lost"),  # no HTTP answer at all
    (_o(status=429, retry_after=True, complete=True), "shed"),
    (_o(status=503, retry_after=True, problem="unavailable", complete=True), "shed"),
    (_o(status=503, retry_after=False, complete=True), "server_error"),
    (_o(status=503, retry_after=True, problem="engine-failure"), "server_error"),
    (_o(status=500, complete=True), "server_error"),
    (_o(status=504, retry_after=True, complete=True), "server_error"),
    (_o(status=422, complete=True), "refused"),
    (_o(status=200, stream_error_status=500, problem="internal-error"), "server_error"),
    (_o(status=200, stream_error_status=503, problem="unavailable"), "shed"),
    (_o(status=200, disconnected=True), "disconnected"),
    (_o(disconnected=True), "disconnected"),  # left before the headers came
])
def test_each_request_lands_in_one_category(outcome, category):
    assert classify(outcome) == category
    assert category in CATEGORIES


def test_duplicates_by_request_id_and_by_completion_id():
    tally = Tally()
    tally.add(_o(sent_id="a", status=200, complete=True, completion_id="c1"))
    tally.add(_o(sent_id="b", status=200, complete=True, completion_id="c2"))
    assert tally.duplicated == 0
    tally.add(_o(sent_id="c", echoed_id="a", status=200, complete=True))  # someone else's
    tally.add(_o(sent_id="d", status=200, complete=True, completion_id="c1"))  # answered twice
    tally.add(_o(sent_id="e", echoed_id=None, status=200, complete=True))  # id not echoed
    tally.add(_o(sent_id="f"))  # lost: nothing to compare
    assert tally.duplicated == 3
    summary = tally.summary()
    assert summary["sent"] == 6 and summary["answered"] == 5 and summary["lost"] == 1
    assert "duplicated" in summary["examples"]


def test_latencies_are_of_answers_only():
    tally = Tally()
    for i, seconds in enumerate([1.0, 2.0, 3.0, 4.0]):
        tally.add(_o(sent_id=f"r{i}", status=200, complete=True, seconds=seconds))
    tally.add(_o(sent_id="gone", status=200, disconnected=True, seconds=99.0))
    tally.add(_o(sent_id="shed", status=429, retry_after=True, seconds=0.01))
    summary = tally.summary()
    assert (summary["p50_s"], summary["p99_s"]) == (2.0, 4.0)
    assert summary["disconnected"] == 1 and summary["shed"] == 1


def test_percentile_and_table():
    assert percentile([], 50) is None
    assert percentile([5.0], 99) == 5.0
    assert percentile(list(map(float, range(1, 101))), 99) == 99.0
    row = {"run": 1, "clients": 8, "seconds": 120.0, **Tally().summary(),
           "rss_start_kib": 2048, "rss_end_kib": 4096, "idle_after": True}
    assert "| 1 | 8 | 120 | 0 | 0 |" in table([row]) and "| 2 | 4 | yes |" in table([row])
