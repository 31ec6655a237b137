"""The speed benchmarks' pages (bench/report/pages.py): latency and throughput against the peers,
per-step and per-token figures, cold compiles, memory and start-up. The accuracy and
behaviour benchmarks' renderers are in bench/report/page_kinds.py, which names them all."""

from __future__ import annotations

import statistics
from typing import Any

from bench.report.page_parts import Rendered, png, table


def cold_compile(results: dict[str, Any]) -> Rendered:
    rows = [{"category": r["category"], "schemas": f"{r['served']} of {r['schemas']}",
             "refused (by the first keyword refused)": f"{r.get('refused', 0)}" + (
                 " (" + ", ".join(f"{k} {n}" for k, n in r["refused_by"].items()) + ")"
                 if r.get("refused_by") else ""),
             "bridged (validator gets more)": f"{r['bridged']} ({r['demoted']})",
             **({"check p50 / p99 ms": f"{r['check_p50']:.1f} / {r['check_p99']:.0f}"}
                if "check_p50" in r else {}),
             "wait p50 / p99 ms": f"{r['wait_p50']:.1f} / {r['wait_p99']:.0f}",
             "bridge p50 / p99 ms": f"{r['bridge_p50']:.1f} / {r['bridge_p99']:.0f}",
             **({"from the schema p99 ms": f"{r['from_schema_p99']:.0f}"}
                if "from_schema_p99" in r else {}),
             **({"within the default budgets p99 ms (schemas over them)":
                 f"{r['from_schema_p99_within_budgets']:.0f} ("
                 + (", ".join(f"{k} {n}" for k, n in r["over_budget"].items()) or "none")
                 + ")"} if "over_budget" in r else {}),
             "same verdict as xgrammar": r["same_verdict"], "valid refused": r["refused_valid"],
             "invalid let through": r["let_through"],
             "right where xgrammar was not": r["bridge_right"]}
            for r in results["categories"]]
    worst = max(results["categories"], key=lambda r: r["bridge_p99"])
    cats = results["categories"]
    # Files from before the schema's check was timed (check_ms) say nothing of it.
    checked = max((r for r in cats if "from_schema_p99" in r),
                  key=lambda r: r["from_schema_p99"], default=None)
    with_check = "" if checked is None else (
        f", {checked['from_schema_p99']:.0f} ms with the schema's check"
        + ("" if checked is worst else f" ({checked['category']})"))
    # Files from before the budgets were counted say nothing of them.
    budgeted = [r for r in cats if "over_budget" in r]
    if budgeted:
        top = max(budgeted, key=lambda r: r["from_schema_p99_within_budgets"])
        with_check += (f"; {top['from_schema_p99_within_budgets']:.0f} ms ({top['category']})"
                       " within the default budgets ("
                       f"{sum(sum(r['over_budget'].values()) for r in budgeted)} of "
                       f"{sum(r['schemas'] for r in budgeted)} schemas over them)")
    return Rendered(sections=[table(rows), ""],
                    headline=f"cold p99 with the bridge at most {worst['bridge_p99']:.0f} ms "
                             f"per category ({worst['category']}){with_check}, against "
                             f"{worst['wait_p99']:.0f} ms waiting there; "
                             f"{sum(r['demoted'] for r in cats)} of "
                             f"{sum(r['bridged'] for r in cats)} bridged schemas leave "
                             f"keywords to the validator ({sum(r['let_through'] for r in cats)}"
                             " invalid instances passed the mask)")


def decode_speed(results: dict[str, Any]) -> Rendered:
    backends = results["backends"]
    rows = [{"backend": name, "unconstrained tok/s": b["unconstrained_tok_s_median"],
             "constrained tok/s": b["constrained_tok_s_median"],
             "ratio": b["ratio_constrained_over_unconstrained"],
             "ratio of medians": (b.get("per_step") or {}).get("ratio_of_medians"),
             "served output tok/s": b.get("served_tok_s_median"),
             "served per output token": (b.get("served_per_output_token") or {}).get(
                 "median_ratio"),
             "served per step": (b.get("served_per_step") or {}).get("median_ratio"),
             "cache hit ms (median)": b.get("hit_lookup_ms_median"),
             "mask ms per token (median)": b.get("mask_ms_per_token_median"),
             "mask share of a step": b.get("mask_share_of_step"),
             "decode step ms": b.get("decode_step_ms_median")} for name, b in backends.items()]
    vocab = [{"vocabulary": name, "size": v["vocab_size"], "compile ms": v["compile_ms"],
              "mask ms per token (median)": v["mask_ms_per_token_median"],
              "p99": v["mask_ms_per_token_p99"]}
             for name, v in results.get("masks_by_vocabulary", {}).items() if isinstance(v, dict)]

    def draw(ax: Any) -> None:
        names = list(backends)
        width = 0.38
        xs = range(len(names))
        ax.bar([x - width / 2 for x in xs], [r["unconstrained tok/s"] for r in rows], width,
               label="unconstrained")
        ax.bar([x + width / 2 for x in xs], [r["constrained tok/s"] for r in rows], width,
               label="constrained")
        ax.set_xticks(list(xs), names)
        ax.set_ylabel("tokens/s, median")
        ax.legend(fontsize=7)

    first = rows[0]
    return Rendered(
        sections=["Median steps per second over runs taken back to back: unconstrained, "
                  "constrained one token a step (the ratio), and constrained as served "
                  "(jump-forward feeds forced tokens several a step: fewer, dearer steps, "
                  "per output token beside per step); and the mask's cost:", "",
                  table(rows), "", "![tokens per second](decode-speed-tokens.png)", "",
                  "The mask's cost per token by vocabulary (one JSON answer replayed):", "",
                  table(vocab) if vocab else "-", ""],
        images={"decode-speed-tokens.png": png(draw, size=(5.5, 3.5))},
        headline=f"{first['backend']}: constrained at {first['ratio']:.2f}x unconstrained "
                 "steps/s, one token a step each"
                 + (f"; as served (jump-forward) {first['served per output token']:.2f}x per "
                    f"output token, {first['served per step']:.2f}x per step"
                    if first["served per output token"] is not None else ""))


def cpu_variants(results: dict[str, Any]) -> Rendered:
    speeds = {k: statistics.median(v) for k, v in results["speeds"].items() if v}
    base = speeds.get("fp32")
    rows = [{"variant": name, "tokens/s (median)": speeds.get(name),
             "vs torch fp32": f"{speeds[name] / base:.2f}x" if base and name in speeds
             else "-", "notes": note} for name, note in results["notes"].items()]

    def draw(ax: Any) -> None:
        ax.bar(list(speeds), list(speeds.values()))
        ax.set_ylabel("tokens/s, median")

    best = max(speeds, key=lambda k: speeds[k])
    return Rendered(
        sections=[f"{results['tokens']} tokens per decode, {results['rounds']} rounds.", "",
                  table(rows), "", "![tokens per second](cpu-variants-speed.png)", ""],
        images={"cpu-variants-speed.png": png(draw, size=(5.5, 3.5))},
        headline=f"{best}: {speeds[best]:.1f} tokens/s"
                 + (f", {speeds[best] / base:.2f}x torch fp32" if base else ""))


def latency(results: dict[str, Any]) -> Rendered:
    import tempfile
    from pathlib import Path

    from bench.speed.latency_report import markdown, plot

    with tempfile.TemporaryDirectory() as tmp:
        images = {f"latency-{p.name}": p.read_bytes() for p in plot(results, Path(tmp)).values()}
    text = markdown(results, plots=[]).split("\n", 1)[1]  # its title is the page's
    text = text.replace("\n## ", "\n### ")
    head = _like_headline(results) or _cold_headline(results)
    if overhead := results.get("upstream_overhead"):  # the run measured StrictCall's overhead
        head = "StrictCall in front of vLLM / vLLM alone, end to end: " + ", ".join(
            f"{r['kind']} {r['e2e_ratio']:.2f}x at concurrency {r['concurrency']}"
            for r in overhead)
    return Rendered(sections=[text, "", *(f"![{n}]({n})" for n in images), ""],
                    images=images, headline=head)


def _like_headline(results: dict[str, Any]) -> str:
    """Against each peer family at its best configuration, by clients: the warm pass's
    median, answers/s and per-token ratios and tokens per answer on each side, then every
    setting of either pass where the goal was missed; a kind no side answered validly says
    so, with the valid counts."""
    rows = results.get("like_with_like", [])
    if not rows:
        return ""
    ours = rows[0]["ours"]
    parts, missed, compared = [], [], False
    for kind, peer in dict.fromkeys((r["kind"], r["peer"]) for r in rows if r["ours"] == ours):
        mine = [r for r in rows if (r["ours"], r["kind"], r["peer"]) == (ours, kind, peer)]
        got = sorted((r for r in mine if r["pass"] == "warm"), key=lambda r: r["concurrency"])
        if any(r["goal"].startswith("not comparable") for r in mine):
            parts.append(f"{kind}, {peer}: {mine[0]['goal'][16:]} (valid "
                         f"{sum(r['valid'] for r in mine)} of {sum(r['n'] for r in mine)} "
                         f"against {sum(r['peer_valid'] or 0 for r in mine)} of "
                         f"{sum(r['peer_n'] or 0 for r in mine)})")
            continue

        def xs(key: str, rows: list[dict[str, Any]] = got) -> str:
            return "/".join("-" if r[key] is None else f"{r[key]:.2f}" for r in rows)

        compared = True
        parts.append(f"{kind}, {peer}: median {xs('e2e_ratio_of_medians')}x, answers/s "
                     f"{xs('throughput_ratio')}x, per token {xs('per_token_ratio_of_medians')}x"
                     ", tokens " + "/".join(f"{r['completion_tokens_p50']:.0f}:"
                                            f"{r['peer_completion_tokens_p50'] or 0:.0f}"
                                            for r in got))
        misses = [f"{r['pass']} {r['concurrency']} ({r['goal'][8:]})"
                  for r in sorted(mine, key=lambda r: (r["pass"], r["concurrency"]))
                  if r["goal"] != "met"]
        if misses:
            missed.append(f"{peer} " + ", ".join(misses))
    clients = "/".join(dict.fromkeys(str(r["concurrency"]) for r in sorted(
        rows, key=lambda r: r["concurrency"])))
    verdict = "; goal missed at " + ", ".join(missed) if missed else \
        "; goal met throughout" if compared else ""
    warm = ", warm" if compared else ""
    return f"{ours} / the peer's best{warm}, {clients} clients: " + "; ".join(parts) + verdict


def _cold_headline(results: dict[str, Any]) -> str:
    """The cold pass, the run's first StrictCall system against its first peer (without
    peer flags: its first two systems): the median per-prompt end-to-end ratio per kind and
    concurrency; a kind the peer answered validly nowhere says so, with the valid counts."""
    ran = [s for s in results.get("systems", []) if s.get("status") == "ran"]
    mine = [s["name"] for s in ran if not s.get("peer")]
    peers = [s["name"] for s in ran if s.get("peer")]
    if mine and peers:
        ours, peer = mine[0], peers[0]
    elif len(ran) >= 2:
        ours, peer = ran[0]["name"], ran[1]["name"]
    else:
        return ""
    cold = [r for r in results["ratios"] if r.get("pass", "warm") == "cold"
            and r["ours"] == ours and r["other"] == peer]
    parts = []
    for kind in dict.fromkeys(r["kind"] for r in results["settings"] if r["system"] == ours):
        mine = [r for r in cold if r["kind"] == kind]
        if mine:
            parts.append(f"{kind} " + ", ".join(f"{r['e2e_ratio']:.2f}x at {r['concurrency']}"
                                                for r in mine))
            continue
        rows = [r for r in results["settings"] if r["kind"] == kind and r["pass"] == "cold"]
        valid = {name: (sum(r["valid"] for r in rows if r["system"] == name),
                        sum(r["n"] for r in rows if r["system"] == name)) for name in (ours, peer)}
        parts.append(f"{kind}: no ratio, valid {valid[ours][0]} of {valid[ours][1]} against "
                     f"{peer}'s {valid[peer][0]} of {valid[peer][1]}")
    return (f"cold pass, {ours} / {peer} median end to end by clients: " + "; ".join(parts)
            if parts else "")


def serve(results: dict[str, Any]) -> Rendered:
    import tempfile
    from pathlib import Path

    from bench.serve.plot import plot
    from bench.serve.report import markdown

    with tempfile.TemporaryDirectory() as tmp:
        drawn = Path(tmp) / "serve.png"
        images = {"serve-load.png": drawn.read_bytes()} if plot(results, drawn) else {}
    text = markdown(results, plot=next(iter(images), None))
    text = text.split("\n", 3)[3].replace("\n## ", "\n### ")  # its title and command: the page's
    rows = results["settings"]
    valid = sum(r["valid"] for r in rows)
    checked = sum(r["valid"] + r["invalid"] + r["cut_off"] for r in rows)
    return Rendered(sections=[text, ""], images=images,
                    headline=f"{valid} of {checked} checked answers valid over "
                             f"{len(rows)} settings, {sum(r['error'] for r in rows)} errors")


def vllm_engine(results: dict[str, Any]) -> Rendered:
    first = results["first_request_s"]
    cold, warm = first["cold_1st"], first["warm_1st"]
    slowest = max(cold, key=lambda t: cold[t])
    rows = [{"contract": t, "cold, 1st request s": cold[t],
             "cold, 2nd request s": first["cold_2nd"].get(t),
             "after the warm-up, 1st request s": warm.get(t)} for t in cold]
    start = results["startup_s"]
    decode = [{"decode": k, **v} for k, v in results["decode"].items()]
    return Rendered(
        sections=[table([{"start-up": k, "s to healthy": v,
                          "grammars warmed": results["grammars_warmed"].get(k)}
                         for k, v in start.items()]), "",
                  "### The first request for each contract", "", table(rows), "",
                  "### Decode", "", table(decode), ""],
        headline=f"first {slowest} request {cold[slowest]:.2f} s cold, "
                 f"{warm[slowest]:.2f} s after the start-up warm-up; constrained decode at "
                 f"{results['ratio_constrained_over_unconstrained']:.2f}x unconstrained")


def gpu_decode(results: dict[str, Any]) -> Rendered:
    from bench.speed.gpu_decode import table as gpu_table

    return Rendered(sections=[gpu_table(results), ""],
                    headline=f"--tiny on {results['device']}: the script's path only, "
                             "no GPU figures")


def load(results: list[dict[str, Any]]) -> Rendered:
    rows = [{k: v for k, v in r.items() if not isinstance(v, dict | list)} for r in results]
    lost = sum(r["lost"] + r["duplicated"] + r["server_error"] for r in results)
    sent = sum(r["sent"] for r in results)
    return Rendered(sections=[table(rows), ""],
                    headline=f"{sent} requests from {results[0]['clients']} clients: "
                             f"{lost} lost, duplicated or 5xx")


def memory(results: dict[str, Any]) -> Rendered:
    from bench.speed.memory import table_of

    header, body = table_of(results["systems"])
    rows = [dict(zip(header, line, strict=True)) for line in body]
    sized = [{"system": r["name"], **r["sized_mib"]} for r in results["systems"]
             if r.get("sized_mib")]
    ran = {r["name"]: r for r in results["systems"] if "skipped" not in r}
    peer = "llama-server" if "llama-server" in ran else "llamacpp-server"
    one = ran.get("strictcall-default") if peer == "llama-server" else \
        ran.get("strictcall-one-row")
    head = ""
    if one is not None and "first_ratio" in one:
        head = (f"{one['name']}: {one['first_ratio']:.2f}x {peer}'s RSS after one json "
                f"question ({one['first_mib']:.0f} against {ran[peer]['first_mib']:.0f} MiB), "
                f"ready in {one['ready_s']:.1f} s against {ran[peer]['ready_s']:.1f} s")
    return Rendered(sections=[
        f"RSS in MiB after start-up, after one json question and after all "
        f"{results['requests']}; the ratio is over {peer}'s at the same point.", "",
        table(rows), "", "What StrictCall sized from its settings (MiB, `/health` memory):",
        "", table(sized), ""], headline=head)


def decode_step(results: dict[str, Any]) -> Rendered:
    summary = results["summary"]

    def cell(value: float | None) -> float | None:
        return None if value is None else round(value, 2)

    rows = [{"system": name, "kind": kind, "ms per output token (median)":
             cell(s["ms_per_step_median"]),
             "its own count, ms per token": cell(s["own_ms_per_token_median"]),
             "model steps / sampled / forced": "-" if "steps_median" not in s else
             f"{s['steps_median']:.0f} / {s['sampled_median']:.0f} / {s['forced_median']:.0f}",
             "ms per step: model / host": "-" if "steps_median" not in s else
             f"{s['forward_ms_per_step_median']:.2f} / {s['host_ms_per_step_median']:.2f}",
             "prompt rounds": s["n"], "tokens (median)": s["tokens_median"]}
            for name, system in summary.items() if name != "ratio"
            for kind, s in (system.get("by_kind") or {"free": system}).items()]
    ratio = summary.get("ratio")
    head = ""
    if ratio and ratio["median"] is not None:
        ours, other = summary[ratio["ours"]], summary[ratio["other"]]
        of_medians = ratio.get("of_medians") or \
            ours["ms_per_step_median"] / other["ms_per_step_median"]
        steps = (f"; {ours['steps_median']:.0f} model steps for {ours['tokens_median']:.0f} "
                 f"tokens" if ours.get("steps_median") is not None else "")
        head = (f"{ratio['ours']} / {ratio['other']} per output token: median of "
                f"{ratio['pairs']} per-round ratios {ratio['median']:.2f}x, ratio of medians "
                f"{of_medians:.2f}x ({ours['ms_per_step_median']:.2f} against "
                f"{other['ms_per_step_median']:.2f} ms){steps}")
    return Rendered(sections=[table(rows), ""], headline=head)
