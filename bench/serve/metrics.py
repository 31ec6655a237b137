"""A target's own Prometheus metrics before and after the run, where it exposes /metrics.

vLLM names its series `vllm:...`; StrictCall uses the same names with `strictcall:` (and
`strictcall_grammar_*` for its grammar cache). The run keeps every series of those names
(histogram buckets left out, their sums and counts kept), and reads the few that say what
the server saw: requests finished, tokens, the server's own mean TTFT and end to end over
the run, queueing, preemptions, the KV cache and prefix cache, grammar compiles.
"""

from __future__ import annotations

import re
from typing import Any

PREFIXES = ("vllm:", "strictcall:", "strictcall_")
_LINE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{.*\})?\s+(\S+)")

# (what, how: "delta" of a counter, "mean" of a histogram's delta, "after" of a gauge,
#  the series' name without its prefix)
KEY_SERIES = (
    ("requests finished", "delta", "request_success_total"),
    ("prompt tokens", "delta", "prompt_tokens_total"),
    ("generation tokens", "delta", "generation_tokens_total"),
    ("server TTFT mean s", "mean", "time_to_first_token_seconds"),
    ("server e2e mean s", "mean", "e2e_request_latency_seconds"),
    ("server queue mean s", "mean", "request_queue_time_seconds"),
    ("preemptions", "delta", "num_preemptions_total"),
    ("prefix cache hit tokens", "delta", "prefix_cache_hits_total"),
    ("prefix cache queried tokens", "delta", "prefix_cache_queries_total"),
    ("prefix reused tokens", "delta", "engine_prefix_reused_tokens_total"),
    ("jump-forward tokens", "delta", "engine_jump_forward_tokens_total"),
    ("KV cache usage (after)", "after", "kv_cache_usage_perc"),
    ("KV cache usage (after)", "after", "gpu_cache_usage_perc"),  # vLLM before 0.10
    ("running (after)", "after", "num_requests_running"),
    ("waiting (after)", "after", "num_requests_waiting"),
    ("grammar compiles", "delta", "grammar_cache_compiles_total"),
    ("grammar cache hits", "delta", "grammar_cache_hits_total"),
)


def parse(text: str) -> dict[str, float]:
    """The samples of our prefixes, by series (name plus labels as written); buckets out."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        match = _LINE.match(line)
        if match is None or not match.group(1).startswith(PREFIXES):
            continue
        name, labels, value = match.groups()
        if name.endswith(("_bucket", "_created")):  # _created: a timestamp, no count
            continue
        try:
            out[name + (labels or "")] = float(value)
        except ValueError:
            continue
    return out


def totals(samples: dict[str, float]) -> dict[str, float]:
    """Each series name's samples summed over their labels."""
    out: dict[str, float] = {}
    for series, value in samples.items():
        name = series.split("{", 1)[0]
        out[name] = out.get(name, 0.0) + value
    return out


def summary(before: dict[str, float] | None, after: dict[str, float] | None
            ) -> dict[str, Any]:
    """The key series (KEY_SERIES) over the run, by the names the target uses; {} where
    the target has no /metrics."""
    if before is None or after is None:
        return {}
    start, end = totals(before), totals(after)
    out: dict[str, Any] = {}
    for what, how, suffix in KEY_SERIES:
        value = _value(start, end, how, suffix)
        if value is not None and what not in out:
            out[what] = value
    return out


def _value(start: dict[str, float], end: dict[str, float], how: str, suffix: str
           ) -> float | None:
    for prefix in ("vllm:", "strictcall:", "strictcall_"):
        name = prefix + suffix
        if how == "after" and name in end:
            return end[name]
        if how == "delta" and name in end:
            return end[name] - start.get(name, 0.0)
        if how == "mean" and f"{name}_count" in end:
            count = end[f"{name}_count"] - start.get(f"{name}_count", 0.0)
            total = end[f"{name}_sum"] - start.get(f"{name}_sum", 0.0)
            return total / count if count else None
    return None
