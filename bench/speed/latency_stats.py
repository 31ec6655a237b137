"""The latency benchmark's numbers: per setting (system, kind, concurrency, pass) the
outcomes, TTFT, time per output token, end-to-end percentiles, throughput and median prompt
length; and ratios measured in the same run, as the median over prompts of one system's time
over another's on the same prompt. Only prompts both systems answered validly enter a ratio:
a fast invalid answer is counted as invalid, never as fast."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

Setting = tuple[str, str, int, str]  # system, kind, concurrency, pass ("cold" | "warm")


@dataclass(frozen=True)
class Sample:
    """One measured request."""

    system: str
    kind: str
    concurrency: int
    pass_: str  # "cold": the first time this server saw the request's grammar; else "warm"
    prompt_id: str
    occurrence: int  # the how-manyth request of this prompt in its setting (0 first)
    outcome: str
    e2e_s: float | None = None
    ttft_s: float | None = None
    tpot_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    tokens_from: str = "usage"
    finish_reason: str | None = None
    error: str | None = None
    text: str = ""

    @property
    def setting(self) -> Setting:
        return (self.system, self.kind, self.concurrency, self.pass_)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Wave:
    """Requests sent to one system at once (the concurrency), and how long they all took."""

    system: str
    kind: str
    concurrency: int
    pass_: str
    requests: int
    seconds: float


def percentile(values: Iterable[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of `values`; None for none."""
    ordered = sorted(values)
    if not ordered:
        return None
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def _median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def summarize(samples: list[Sample], waves: list[Wave]) -> list[dict[str, Any]]:
    """One row per setting, in the order settings first appear."""
    groups: dict[Setting, list[Sample]] = defaultdict(list)
    for s in samples:
        groups[s.setting].append(s)
    seconds: dict[Setting, float] = defaultdict(float)
    for w in waves:
        seconds[(w.system, w.kind, w.concurrency, w.pass_)] += w.seconds
    return [_row(setting, got, seconds.get(setting)) for setting, got in groups.items()]


def _row(setting: Setting, got: list[Sample], seconds: float | None) -> dict[str, Any]:
    system, kind, concurrency, pass_ = setting
    timed = [s for s in got if s.e2e_s is not None and s.outcome != "error"]
    e2e = [s.e2e_s for s in timed if s.e2e_s is not None]
    tokens = sum(s.completion_tokens or 0 for s in timed)
    counts = {o: sum(s.outcome == o for s in got)
              for o in ("valid", "invalid", "cut_off", "no_call", "error")}
    return {"system": system, "kind": kind, "concurrency": concurrency, "pass": pass_,
            "n": len(got), **counts,
            "prompt_tokens_p50": _median(s.prompt_tokens for s in timed),
            "completion_tokens_p50": _median(s.completion_tokens for s in timed),
            "ttft_s_p50": _median(s.ttft_s for s in timed),
            "tpot_ms_p50": _scaled(_median(s.tpot_s for s in timed), 1000),
            "ms_per_token_overall": (1000 * sum(e2e) / tokens) if tokens else None,
            "e2e_s_p50": percentile(e2e, 50), "e2e_s_p90": percentile(e2e, 90),
            "e2e_s_p99": percentile(e2e, 99),
            "requests_per_s": len(timed) / seconds if seconds else None,
            "tokens_per_s": tokens / seconds if seconds else None,
            "tokens_from": sorted({s.tokens_from for s in timed})}


def _scaled(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


def paired_ratios(samples: list[Sample], ours: str, other: str, *, pass_: str = "warm"
                  ) -> list[dict[str, Any]]:
    """Per (kind, concurrency): the median over prompts of ours' time / other's time (end to
    end, first token, per output token), on the prompts both answered validly."""
    kinds = sorted({s.kind for s in samples if s.system == ours})
    return [row for kind in kinds for row in _pair_rows(
        samples, (ours, kind), (other, kind), pass_=pass_, need_valid=True)]


def kind_ratios(samples: list[Sample], system: str, kind: str, baseline: str, *,
                pass_: str = "warm") -> list[dict[str, Any]]:
    """One system's `kind` against its `baseline` kind on the same prompts (json against
    free: constrained against unconstrained), per concurrency. Any finished answer counts:
    this compares the cost of a token, and free answers are often invalid."""
    return _pair_rows(samples, (system, kind), (system, baseline), pass_=pass_,
                      need_valid=False)


def _pair_rows(samples: list[Sample], ours: tuple[str, str], other: tuple[str, str], *,
               pass_: str, need_valid: bool) -> list[dict[str, Any]]:
    mine, theirs = (_by_prompt(samples, *side, pass_=pass_, need_valid=need_valid)
                    for side in (ours, other))
    pairs: dict[int, list[tuple[Sample, Sample]]] = defaultdict(list)
    for key, a in mine.items():
        if key in theirs:
            pairs[key[0]].append((a, theirs[key]))
    kind = ours[1] if ours[1] == other[1] else f"{ours[1]}/{other[1]}"
    return [{"ours": ours[0], "other": other[0], "kind": kind, "concurrency": c,
             "pass": pass_, "pairs": len(got), "e2e_ratio": _ratio(got, lambda s: s.e2e_s),
             "ttft_ratio": _ratio(got, lambda s: s.ttft_s),
             "tpot_ratio": _ratio(got, lambda s: s.tpot_s)}
            for c, got in sorted(pairs.items())]


def _by_prompt(samples: list[Sample], system: str, kind: str, *, pass_: str,
               need_valid: bool) -> dict[tuple[int, str, int], Sample]:
    """(concurrency, prompt id, occurrence) -> the sample, for one system and kind."""
    return {(s.concurrency, s.prompt_id, s.occurrence): s for s in samples
            if s.system == system and s.kind == kind and s.pass_ == pass_
            and s.e2e_s is not None and (s.outcome == "valid" or not need_valid)}


def _ratio(pairs: list[tuple[Sample, Sample]],
           metric: Callable[[Sample], float | None]) -> float | None:
    ratios = []
    for a, b in pairs:
        x, y = metric(a), metric(b)
        if x is not None and y:
            ratios.append(x / y)
    return statistics.median(ratios) if ratios else None


def cold_vs_warm(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per system and kind: median TTFT and end to end of the cold pass beside the warm
    pass at the same concurrency (the grammar compiled on the first request or cached)."""
    warm = {(r["system"], r["kind"], r["concurrency"]): r for r in rows if r["pass"] == "warm"}
    out = []
    for r in rows:
        w = warm.get((r["system"], r["kind"], r["concurrency"]))
        if r["pass"] == "cold" and w is not None:
            out.append({"system": r["system"], "kind": r["kind"],
                        "concurrency": r["concurrency"],
                        "cold_ttft_s_p50": r["ttft_s_p50"], "warm_ttft_s_p50": w["ttft_s_p50"],
                        "cold_e2e_s_p50": r["e2e_s_p50"], "warm_e2e_s_p50": w["e2e_s_p50"]})
    return out
