"""The serve benchmark's numbers per target and setting, from the raw records alone.

- TTFT: sent to the first output event (text, reasoning or a call's arguments).
- TPOT: per request, (end to end - TTFT) / (output tokens - 1); its percentiles are over
  requests.
- ITL: the gaps between a request's output events, pooled over the setting's requests
  (an event may carry several tokens: a grammar's forced tokens come together).
- Percentiles are nearest-rank (bench/speed/latency_stats.py); the mean beside them.
- Throughput: over the setting's wall time for that target, from its first send to its
  last answer: finished requests/s, output tokens/s, prompt tokens/s where every finished
  request's usage said.
- Goodput: requests/s that met every SLO (`--slo ttft_ms=500,e2e_ms=2000`; keys ttft_ms,
  tpot_ms, e2e_ms) AND whose answer was usable (valid, no_call, unchecked): a fast invalid
  tool call is no good. `slo_met` counts the SLO part alone. A request of one token has no
  TPOT and meets a TPOT SLO.
Errors are not timed: they are counted by HTTP status (or "stream" for a 2xx stream that
broke or ended in an error event, or the exception's name where nothing answered).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable
from typing import Any

from bench.serve.record import Record
from bench.serve.validity import OUTCOMES
from bench.speed.latency_stats import percentile

PERCENTILES = (50, 90, 95, 99)
SLO_KEYS = ("ttft_ms", "tpot_ms", "e2e_ms")
USABLE = frozenset({"valid", "no_call", "unchecked"})


class SloError(ValueError):
    """A --slo that cannot be read; the message shows the form."""


def parse_slo(text: str | None) -> dict[str, float]:
    """`ttft_ms=500,e2e_ms=2000` -> {"ttft_ms": 500.0, "e2e_ms": 2000.0}."""
    slo: dict[str, float] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        key, eq, value = part.partition("=")
        key = key.strip()
        if key not in SLO_KEYS or not eq:
            raise SloError(f"--slo {part!r}: use {', '.join(k + '=N' for k in SLO_KEYS)} "
                           "(milliseconds), e.g. --slo ttft_ms=500,e2e_ms=2000")
        try:
            slo[key] = float(value)
        except ValueError:
            raise SloError(f"--slo {part!r}: {value!r} is not a number of ms") from None
    return slo


def meets_slo(r: Record, slo: dict[str, float]) -> bool:
    if r.outcome == "error":
        return False
    if "ttft_ms" in slo and (r.ttft_s is None or r.ttft_s * 1000 > slo["ttft_ms"]):
        return False
    tpot = r.tpot_s
    if "tpot_ms" in slo and tpot is not None and tpot * 1000 > slo["tpot_ms"]:
        return False
    return not ("e2e_ms" in slo and r.e2e_s * 1000 > slo["e2e_ms"])


def error_key(r: Record) -> str:
    if r.status is None:
        return (r.error or "error").split(":", 1)[0]
    return str(r.status) if r.status >= 300 else "stream"


def distribution(values: Iterable[float]) -> dict[str, float | None]:
    ordered = sorted(values)
    out: dict[str, float | None] = {"mean": statistics.fmean(ordered) if ordered else None}
    out.update({f"p{q}": percentile(ordered, q) for q in PERCENTILES})
    return out


def summarize(records: list[Record], slo: dict[str, float]) -> list[dict[str, Any]]:
    """One row per (target, setting) over the measured records, in the order they ran."""
    groups: dict[tuple[str, str], list[Record]] = {}
    for r in records:
        if r.phase == "measure":
            groups.setdefault((r.target, r.setting), []).append(r)
    return [setting_row(target, setting, got, slo)
            for (target, setting), got in groups.items()]


def setting_row(target: str, setting: str, got: list[Record], slo: dict[str, float]
                ) -> dict[str, Any]:
    done = [r for r in got if r.outcome != "error"]
    seconds = max(r.end_s for r in got) - min(r.start_s for r in got)
    output = sum(r.completion_tokens or 0 for r in done)
    prompts = [r.prompt_tokens for r in done]
    prompt_total = sum(p for p in prompts if p is not None) \
        if done and None not in prompts else None
    good = [r for r in done if r.outcome in USABLE and meets_slo(r, slo)]
    lags = [r.start_s - r.scheduled_s for r in got if r.scheduled_s is not None]
    return {
        "target": target, "setting": setting, "n": len(got), "finished": len(done),
        **{o: sum(r.outcome == o for r in got) for o in OUTCOMES},
        "errors_by_status": dict(sorted(Counter(error_key(r) for r in got
                                                if r.outcome == "error").items())),
        "seconds": seconds,
        "requests_per_s": _per(len(done), seconds),
        "output_tokens_per_s": _per(output, seconds),
        "prompt_tokens_per_s": None if prompt_total is None else _per(prompt_total, seconds),
        "slo_met": sum(meets_slo(r, slo) for r in done), "good": len(good),
        "goodput_per_s": _per(len(good), seconds),
        "ttft_ms": distribution(r.ttft_s * 1000 for r in done if r.ttft_s is not None),
        "tpot_ms": distribution(r.tpot_s * 1000 for r in done if r.tpot_s is not None),
        "itl_ms": distribution(g * 1000 for r in done for g in r.itl_s),
        "e2e_ms": distribution(r.e2e_s * 1000 for r in done),
        "prompt_tokens_p50": percentile([p for p in prompts if p is not None], 50),
        "output_tokens_p50": percentile([r.completion_tokens or 0 for r in done], 50),
        "tokens_from": sorted({r.tokens_from for r in done}),
        "send_lag_ms_max": max(lags) * 1000 if lags else None,
    }


def _per(amount: float, seconds: float) -> float | None:
    return amount / seconds if seconds > 0 else None


def by_workload(records: list[Record]) -> list[dict[str, Any]]:
    """Per target and workload, over every measured setting: the outcomes and e2e p50."""
    groups: dict[tuple[str, str], list[Record]] = {}
    for r in records:
        if r.phase == "measure":
            groups.setdefault((r.target, r.workload), []).append(r)
    return [{"target": target, "workload": workload, "n": len(got),
             **{o: sum(r.outcome == o for r in got) for o in OUTCOMES},
             "e2e_ms_p50": percentile([r.e2e_s * 1000 for r in got if r.outcome != "error"],
                                      50)}
            for (target, workload), got in groups.items()]
