"""Load settings and arrival schedules, apart from any clock or HTTP.

A setting is a request rate (open loop: requests are sent at their scheduled times whether
or not earlier ones have answered) or a concurrency (closed loop: that many clients, each
sending its next request when its last one answered). `--rate 1,2,4,8` ramps through rates
in one run, to find where latency turns up (the knee). Arrivals at a rate are Poisson
(exponential gaps, what many independent users make) or constant (evenly spaced); `inf`
sends every request at once.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Literal

Mode = Literal["rate", "concurrency"]
Arrivals = Literal["poisson", "constant"]


@dataclass(frozen=True)
class Setting:
    mode: Mode
    value: float  # requests/s (math.inf: all at once), or clients

    @property
    def label(self) -> str:
        if self.mode == "concurrency":
            return f"concurrency {int(self.value)}"
        return "rate inf" if math.isinf(self.value) else f"rate {self.value:g}/s"


class SettingError(ValueError):
    """A --rate or --concurrency that cannot be used; the message says which and why."""


def parse_settings(rates: str | None, concurrencies: str | None) -> list[Setting]:
    """`--rate 1,2,inf` and `--concurrency 1,4`: rates first, each list in its order."""
    settings = [Setting("rate", _number(r, "--rate")) for r in _parts(rates)]
    for c in _parts(concurrencies):
        value = _number(c, "--concurrency")
        if value != int(value) or math.isinf(value):
            raise SettingError(f"--concurrency {c!r}: a whole number of clients, e.g. 4")
        settings.append(Setting("concurrency", value))
    if not settings:
        raise SettingError("give --rate (requests/s) or --concurrency (clients), or both")
    return settings


def _parts(text: str | None) -> list[str]:
    return [p.strip() for p in (text or "").split(",") if p.strip()]


def _number(text: str, flag: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise SettingError(f"{flag} {text!r}: not a number") from None
    if not value > 0:
        raise SettingError(f"{flag} {text!r}: must be above 0")
    return value


def arrivals(rate: float, *, kind: Arrivals, rng: random.Random, count: int | None = None,
             duration_s: float | None = None, offset_s: float = 0.0) -> list[float]:
    """Send times (seconds from the setting's start), the first at `offset_s`: `count`
    of them, or as many as fall before `duration_s`, whichever ends first."""
    if count is None and duration_s is None:
        raise SettingError("give --num-requests or --duration (or both)")
    if math.isinf(rate):
        if count is None:
            raise SettingError("--rate inf sends --num-requests at once: give --num-requests")
        return [0.0] * count
    times: list[float] = []
    t = offset_s
    while (count is None or len(times) < count) and (duration_s is None or t < duration_s):
        times.append(t)
        t += rng.expovariate(rate) if kind == "poisson" else 1 / rate
    return times


def interleaved(names: list[str], rate: float, *, kind: Arrivals, seed: int,
                count: int | None = None, duration_s: float | None = None
                ) -> list[tuple[float, str, int]]:
    """(send time, target, sequence number) for several targets at `rate` each, merged in
    time: each target its own arrivals (Poisson: its own random stream; constant: the
    targets' turns staggered evenly), so requests alternate between targets."""
    merged = []
    for j, name in enumerate(names):
        rng = random.Random(f"{seed}:{name}")
        offset = 0.0 if kind == "poisson" or math.isinf(rate) else j / (len(names) * rate)
        times = arrivals(rate, kind=kind, rng=rng, count=count, duration_s=duration_s,
                         offset_s=offset)
        merged += [(t, j, name, seq) for seq, t in enumerate(times)]
    merged.sort()
    return [(t, name, seq) for t, _, name, seq in merged]


def rotated(names: list[str], shift: int) -> list[str]:
    """`names` starting at the `shift`th (mod len): each setting's targets in turn, the
    first one changing from setting to setting."""
    shift %= len(names)
    return names[shift:] + names[:shift]
