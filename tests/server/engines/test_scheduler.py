"""The decode loop's scheduler, as a pure policy: which prompt goes first, how many of its
tokens a step prefills, and how the time share is paid for."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from server.engines.scheduler import SchedulePolicy, Scheduler


@dataclass
class Prompt:
    left: int
    arrived: float


def pick(scheduler: Scheduler, prompts: list[Prompt], now: float = 10.0) -> Prompt | None:
    return scheduler.pick(prompts, left=lambda p: p.left, arrived=lambda p: p.arrived,
                          now=now)


def test_shortest_first_unless_a_longer_prompt_has_waited_its_difference():
    scheduler = Scheduler(SchedulePolicy(prefill_order="shortest"), token_s=0.01)
    long_, short = Prompt(500, arrived=9.0), Prompt(20, arrived=9.5)
    assert pick(scheduler, [long_, short]) is short
    # 480 more tokens at 10 ms is 4.8 s: once it has waited that much longer, it goes first.
    assert pick(scheduler, [Prompt(500, arrived=4.0), short]).left == 500


def test_arrival_order_ignores_length():
    scheduler = Scheduler(SchedulePolicy(prefill_order="arrival"))
    first = Prompt(900, arrived=1.0)
    assert pick(scheduler, [Prompt(5, arrived=2.0), first]) is first
    assert pick(scheduler, []) is None


def test_nothing_decoding_gets_a_whole_chunk():
    scheduler = Scheduler(SchedulePolicy(prefill_chunk=64, prefill_share=0.0))
    assert scheduler.budget(1000, decoding=False) == 64
    assert scheduler.budget(10, decoding=False) == 10


def test_decode_first_never_prefills_beside_running_rows():
    scheduler = Scheduler(SchedulePolicy(prefill_share=0.0))
    for _ in range(100):
        scheduler.decoded(0.05, waiting=True)
        assert scheduler.budget(1000, decoding=True) == 0


def test_the_share_buys_prefill_tokens_at_their_measured_cost():
    scheduler = Scheduler(SchedulePolicy(prefill_chunk=128, prefill_share=0.5),
                          token_s=0.01)
    scheduler.decoded(0.05, waiting=True)  # share 0.5: as much prefill as decode time
    assert scheduler.budget(1000, decoding=True) == 0  # 5 tokens: not worth a pass yet
    scheduler.decoded(0.05, waiting=True)
    assert scheduler.budget(1000, decoding=True) == 10
    scheduler.prefilled(10, None, decoding=True)
    assert scheduler.credit_s == pytest.approx(0.0)
    assert scheduler.budget(1000, decoding=True) == 0


def test_credit_is_not_banked_while_nothing_waits_nor_beyond_a_chunk():
    scheduler = Scheduler(SchedulePolicy(prefill_chunk=32, prefill_share=0.5), token_s=0.01)
    for _ in range(50):
        scheduler.decoded(0.1, waiting=True)
    assert scheduler.budget(1000, decoding=True) == 32
    scheduler.decoded(0.1, waiting=False)
    assert scheduler.credit_s <= 0.0


def test_measured_prefill_cost_moves_toward_what_it_took():
    scheduler = Scheduler(SchedulePolicy(), token_s=0.01)
    for _ in range(30):
        scheduler.prefilled(100, 0.5, decoding=False)
    assert scheduler.token_s == pytest.approx(0.005, rel=0.01)
    scheduler.prefilled(2, 10.0, decoding=False)  # too few tokens to say anything
    assert scheduler.token_s == pytest.approx(0.005, rel=0.01)


def test_short_prompts_join_at_once():
    scheduler = Scheduler(SchedulePolicy(short_prefill=16))
    assert scheduler.is_short(1) and scheduler.is_short(16) and not scheduler.is_short(17)


@pytest.mark.parametrize("bad", [{"prefill_chunk": 0}, {"prefill_share": 1.5},
                                 {"short_prefill": -1}])
def test_out_of_range_policies_are_refused_by_name(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        SchedulePolicy(**bad)
