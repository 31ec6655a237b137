"""Like with like: StrictCall against the best configuration of each peer, per kind,
concurrency and pass, and a check that a peer asked for forced calls saw the tools at all.

A peer family is a peer's name less its slots (`llama-server-np2` is `llama-server` with 2
slots; `llama-server-compact` is its own family: the json kind asked with the compact
grammar). For each measure the family's best configuration is taken on its own: the lowest
median and p99 end to end, the highest throughput, the lowest time per output token; which
configuration gave it is named beside it. StrictCall meets the goal at a setting when its
median is below the best median, its throughput at least the best throughput, and its time per
output token within 10% of the best.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

import httpx

from bench.common.markdown_table import table
from bench.speed.latency_stats import Sample, paired_ratios
from bench.speed.latency_workload import Prompt, request_body

PER_TOKEN_SLACK = 1.10  # within 10% of the best peer's time per output token


def family(name: str) -> str:
    """A peer's name without its slots: `llama-server-compact-np2` -> `llama-server-compact`."""
    return re.sub(r"-np[0-9]+$", "", name)


async def tools_seen(client: httpx.AsyncClient, dialect: Any, prompt: Prompt
                     ) -> dict[str, Any]:
    """The prompt's length in tokens as the server renders it with the tools of a forced
    request and without them (one token asked each time, not streamed): a server whose
    template renders no tools gets the same prompt both ways, and its forced answers say
    nothing about calling tools."""
    asked = request_body(prompt, "forced", dialect=dialect, max_tokens=1)
    if asked is None:
        return {}
    bare = {k: v for k, v in asked.items()
            if k not in ("stream", "stream_options", "tools", "tool_choice")}
    counts = []
    for body in ({**bare, "tools": asked["tools"], "tool_choice": asked["tool_choice"]}, bare):
        try:
            counts.append(await prompt_tokens(client, body))
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as error:
            return {"error": f"{type(error).__name__}: {str(error)[:200]}"}
    return {"prompt_tokens_with_tools": counts[0], "prompt_tokens_without": counts[1],
            "rendered": counts[0] > counts[1], "prompt_id": prompt.id}


async def prompt_tokens(client: httpx.AsyncClient, body: dict[str, Any]) -> int:
    """The prompt's length in tokens as the server renders `body` (sent not streamed):
    its answer's `usage.prompt_tokens`. Raises what the request or the answer raises."""
    body = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
    resp = await client.post("/v1/chat/completions", json=body)
    return int(resp.json()["usage"]["prompt_tokens"])


def like_with_like(rows: list[dict[str, Any]], samples: list[Sample],
                   statuses: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per StrictCall system, peer family, kind, concurrency and pass where both
    answered: each side's median, p99, answers/s, tokens/s, output tokens per answer and ms
    per output token, the family's best configuration for each, and the ratios."""
    peers = {s["name"] for s in statuses if s.get("status") == "ran" and s.get("peer")}
    ours = [s["name"] for s in statuses if s.get("status") == "ran" and not s.get("peer")]
    unseen = {s["name"] for s in statuses if (s.get("tools_prompt") or {}).get("rendered")
              is False}
    by_setting = {(r["system"], r["kind"], r["concurrency"], r["pass"]): r for r in rows}
    families: dict[str, list[str]] = defaultdict(list)
    for name in sorted(peers):
        families[family(name)].append(name)
    out = []
    for mine in ours:
        for (system, kind, c, pass_), r in by_setting.items():
            if system != mine:
                continue
            for fam, names in families.items():
                theirs = [by_setting[(n, kind, c, pass_)] for n in names
                          if (n, kind, c, pass_) in by_setting]
                if theirs:
                    out.append(_row(r, fam, theirs, samples, pass_,
                                    tools_unseen=kind == "forced" and any(
                                        t["system"] in unseen for t in theirs)))
    return out


def _row(r: dict[str, Any], fam: str, theirs: list[dict[str, Any]], samples: list[Sample],
         pass_: str, *, tools_unseen: bool) -> dict[str, Any]:
    def best(key: str, *, high: bool = False) -> tuple[float | None, str | None]:
        present = [t for t in theirs if t.get(key) is not None]
        if not present:
            return None, None
        top = (max if high else min)(present, key=lambda t: t[key])
        return top[key], top["system"]

    median, median_by = best("e2e_s_p50")
    p99, p99_by = best("e2e_s_p99")
    rate, rate_by = best("requests_per_s", high=True)
    tokens_s, tokens_s_by = best("tokens_per_s", high=True)
    per_token, per_token_by = best("tpot_ms_p50")
    paired = next((p for p in paired_ratios(samples, r["system"], median_by, pass_=pass_)
                   if p["kind"] == r["kind"] and p["concurrency"] == r["concurrency"]),
                  None) if median_by else None
    at_best = next(t for t in theirs if t["system"] == median_by) if median_by else {}
    row = {"ours": r["system"], "peer": fam, "kind": r["kind"],
           "concurrency": r["concurrency"], "pass": pass_,
           "n": r["n"], "valid": r["valid"], "peer_n": at_best.get("n"),
           "peer_valid": at_best.get("valid"),
           "e2e_s_p50": r["e2e_s_p50"], "peer_e2e_s_p50": median, "peer_e2e_s_p50_by": median_by,
           "e2e_s_p99": r["e2e_s_p99"], "peer_e2e_s_p99": p99, "peer_e2e_s_p99_by": p99_by,
           "requests_per_s": r["requests_per_s"], "peer_requests_per_s": rate,
           "peer_requests_per_s_by": rate_by,
           "tokens_per_s": r["tokens_per_s"], "peer_tokens_per_s": tokens_s,
           "peer_tokens_per_s_by": tokens_s_by,
           "completion_tokens_p50": r["completion_tokens_p50"],
           "peer_completion_tokens_p50": at_best.get("completion_tokens_p50"),
           "tpot_ms_p50": r["tpot_ms_p50"], "peer_tpot_ms_p50": per_token,
           "peer_tpot_ms_p50_by": per_token_by,
           "e2e_ratio_of_medians": _over(r["e2e_s_p50"], median),
           "e2e_median_ratio": paired["e2e_ratio"] if paired else None,
           "paired_prompts": paired["pairs"] if paired else 0,
           "per_token_ratio_of_medians": _over(r["tpot_ms_p50"], per_token),
           "per_token_median_ratio": paired["tpot_ratio"] if paired else None,
           "throughput_ratio": _over(r["requests_per_s"], rate),
           "tools_unseen": tools_unseen}
    row["goal"] = _goal(row)
    return row


def _over(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _goal(row: dict[str, Any]) -> str:
    """Whether the row meets StrictCall's goal against this family, and where it misses."""
    if row["tools_unseen"]:
        return "not comparable: the peer's template rendered no tools"
    if not row["valid"] or not row["peer_valid"]:
        return "not comparable: no valid answers on one side"
    misses = []
    if (row["e2e_ratio_of_medians"] or 0) >= 1:
        misses.append("median")
    if (row["throughput_ratio"] or 0) < 1:
        misses.append("throughput")
    if (row["per_token_ratio_of_medians"] or 0) > PER_TOKEN_SLACK:
        misses.append("per token")
    return "met" if not misses else "missed: " + ", ".join(misses)


def markdown_table(rows: list[dict[str, Any]]) -> str:
    return table(["system", "against", "kind", "conc.", "pass", "valid", "peer valid",
                  "e2e s p50", "peer best", "p99", "peer best p99", "answers/s",
                  "peer best answers/s", "out tok p50", "peer out tok p50", "ms/token p50",
                  "peer best ms/token", "e2e: ratio of medians / median ratio (prompts)",
                  "per token: ratio of medians / median ratio", "goal"], [
        [r["ours"], r["peer"], r["kind"], r["concurrency"], r["pass"], f"{r['valid']}/{r['n']}",
         f"{r['peer_valid']}/{r['peer_n']}", r["e2e_s_p50"],
         _by(r["peer_e2e_s_p50"], r["peer_e2e_s_p50_by"]), r["e2e_s_p99"],
         _by(r["peer_e2e_s_p99"], r["peer_e2e_s_p99_by"]), r["requests_per_s"],
         _by(r["peer_requests_per_s"], r["peer_requests_per_s_by"]),
         r["completion_tokens_p50"], r["peer_completion_tokens_p50"], r["tpot_ms_p50"],
         _by(r["peer_tpot_ms_p50"], r["peer_tpot_ms_p50_by"]),
         f"{as_ratio(r['e2e_ratio_of_medians'])} / {as_ratio(r['e2e_median_ratio'])} "
         f"({r['paired_prompts']})",
         f"{as_ratio(r['per_token_ratio_of_medians'])} / {as_ratio(r['per_token_median_ratio'])}",
         r["goal"]] for r in rows])


def _by(value: float | None, name: str | None) -> str:
    return "-" if value is None else f"{value:.3g} ({name})"


def as_ratio(value: float | None) -> str:
    """A ratio as the tables print it ("0.96x"; "-" where there is none)."""
    return "-" if value is None else f"{value:.2f}x"


def print_like_with_like(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        print(f"{r['ours']} / best {r['peer']}, {r['kind']} at {r['concurrency']} "
              f"({r['pass']}): median {as_ratio(r['e2e_ratio_of_medians'])} "
              f"(by {r['peer_e2e_s_p50_by']}), answers/s {as_ratio(r['throughput_ratio'])}, "
              f"tokens per answer {r['completion_tokens_p50']} against "
              f"{r['peer_completion_tokens_p50']}, per token "
              f"{as_ratio(r['per_token_ratio_of_medians'])}; {r['goal']}")
