"""Which prompt the decode loop (engines/loop.py) prefills next, and how much of it, around
the decode steps of the requests already running.

Measured on a 2-core CPU (README, "Scheduling"): one compute thread is compute-bound, so a
prompt token prefilled costs the same whether or not rows decode beside it, and batching
decode rows gains little (about 1.25x at 4-8 rows). Latency is then decided by order:
finishing the requests nearest their end first (shortest remaining work) keeps every
percentile low, where prefilling a whole wave before decoding any of it finishes them all
at the wave's end. Hence the policy:

- A prompt with few tokens left to prefill (a prefix-cache hit leaves one; `short_prefill`)
  joins the running batch at once: joining costs less than one decode step.
- A longer prompt is prefilled in pieces of at most `prefill_chunk` tokens. While other
  requests decode, prefill gets `prefill_share` of the engine's time (a credit earned by
  decode steps, spent by prefill tokens at their measured cost); with nothing decoding it
  gets all of it.
- Among prompts waiting, `prefill_order`: "shortest" (fewest tokens left first, each
  waiting second counting as much as a second of prefill, so a long prompt is not starved)
  or "arrival".

Costs are measured as the loop runs (seconds per prefill token), so the share means time on
any hardware: on a GPU, where decode steps are memory-bound, the same share buys many more
prefill tokens per step."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

PrefillOrder = Literal["shortest", "arrival"]
T = TypeVar("T")

_EMA = 0.2  # weight of the newest measurement of a prefill token's cost
_MIN_CHUNK = 8  # fewer tokens than this are not worth a forward pass of their own


@dataclass(frozen=True)
class SchedulePolicy:
    """The loop's scheduling settings (Settings: --prefill-chunk, --prefill-share,
    --short-prefill, --prefill-order), chosen by `strictcall-bench latency`."""

    prefill_chunk: int = 128
    prefill_share: float = 0.25
    short_prefill: int = 16
    prefill_order: PrefillOrder = "shortest"

    def __post_init__(self) -> None:
        if self.prefill_chunk < 1:
            raise ValueError(f"prefill_chunk must be at least 1, not {self.prefill_chunk}")
        if not 0.0 <= self.prefill_share <= 1.0:
            raise ValueError(f"prefill_share is a share of time in [0, 1], not "
                             f"{self.prefill_share}")
        if self.short_prefill < 0:
            raise ValueError(f"short_prefill must be 0 or more, not {self.short_prefill}")


class Scheduler:
    """The loop's prefill decisions and the costs they are made from (one worker thread)."""

    def __init__(self, policy: SchedulePolicy, *, token_s: float = 0.005) -> None:
        self.policy = policy
        self.token_s = token_s  # seconds per prefilled prompt token, measured as it runs
        self.credit_s = 0.0  # prefill time earned by decode steps, not yet spent

    def pick(self, candidates: Sequence[T], *, left: Callable[[T], int],
             arrived: Callable[[T], float], now: float) -> T | None:
        """The candidate to prefill next: by `prefill_order`; `left(c)` its prompt tokens
        still to prefill, `arrived(c)` when it was queued (the clock of `now`)."""
        if not candidates:
            return None
        if self.policy.prefill_order == "arrival":
            return min(candidates, key=arrived)
        # Expected prefill seconds, less the seconds already waited: a long prompt goes
        # first once it has waited as long as its prefill is longer than the others'.
        return min(candidates, key=lambda c: left(c) * self.token_s - (now - arrived(c)))

    def is_short(self, left: int) -> bool:
        """A prompt this close to done joins the running batch without waiting its turn."""
        return left <= self.policy.short_prefill

    def budget(self, left: int, *, decoding: bool) -> int:
        """Prompt tokens to prefill in this step for a prompt with `left` to go: a whole
        chunk when nothing decodes; while rows decode, what the earned credit pays for
        (0: not this step)."""
        chunk = min(self.policy.prefill_chunk, left)
        if not decoding or self.policy.prefill_share >= 1.0:
            return chunk
        paid = int(self.credit_s / self.token_s)
        if paid >= chunk:
            return chunk
        return paid if paid >= _MIN_CHUNK else 0

    def decoded(self, seconds: float, *, waiting: bool) -> None:
        """A decode step of `seconds` ran; `waiting`: a prompt waits for prefill. Credit is
        earned only while someone waits, and never more than one chunk's worth."""
        share = self.policy.prefill_share
        if not waiting or share <= 0.0:
            self.credit_s = min(self.credit_s, 0.0)
            return
        earned = seconds * share / (1.0 - share) if share < 1.0 else seconds
        self.credit_s = min(self.credit_s + earned, self.policy.prefill_chunk * self.token_s)

    def prefilled(self, tokens: int, seconds: float | None, *, decoding: bool) -> None:
        """`tokens` were prefilled; `seconds`: measured for them alone (None when they ran
        in one forward pass with decode rows, charged at the measured rate). Spends
        credit where rows decoded meanwhile."""
        if tokens <= 0:
            return
        if seconds is not None and tokens >= _MIN_CHUNK:
            self.token_s += _EMA * (seconds / tokens - self.token_s)
        if decoding:
            self.credit_s -= tokens * self.token_s
