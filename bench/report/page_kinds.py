"""Each benchmark's results as tables, plots and a headline (bench/report/pages.py). A benchmark
with no renderer here gets the generic one (bench/report/page_parts.py), which tables any shape.
The speed benchmarks' renderers are in bench/report/page_speed.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.report.page_parts import Rendered, cell, generic, png, table
from bench.report.page_peers import bfcl_missing, bfcl_peer
from bench.report.page_speed import (
    cold_compile,
    cpu_variants,
    decode_speed,
    decode_step,
    gpu_decode,
    latency,
    load,
    memory,
    serve,
    vllm_engine,
)


def tool_selection(results: dict[str, Any]) -> Rendered:
    ks, rows = results["ks"], results["rows"]
    served = rows[0]
    recall = [{"method": r["method"], **{f"k={k}": r.get(f"recall@{k}") for k in ks},
               **{k.replace("recall@", "first "): v for k, v in r.items()
                  if k.startswith("recall@") and int(k[7:]) not in ks}} for r in rows]

    def draw(ax: Any) -> None:
        for r in rows:
            points = [(k, r[f"recall@{k}"]) for k in ks if f"recall@{k}" in r]
            if len(points) > 1:
                ax.plot(*zip(*points, strict=True), marker="o", label=r["method"][:48])
        ax.set_xlabel("k (tools offered)")
        ax.set_ylabel("questions whose tool is offered")
        ax.set_ylim(0, 1)
        ax.legend(fontsize=7)

    middle = ks[len(ks) // 2]
    turns = results.get("multi_turn") or []
    multi = [{"newest message's weight": f"{r['newest_weight']:g}",
              **{f"k={k}": f"{r[f'turns@{k}']} of {r['turns']} turns "
                           f"({r[f'functions@{k}']} of {r['functions']} functions)"
                 for k in ks}} for r in turns]
    dialogues = ["In a dialogue (BFCL's multi-turn base category, each turn with calls; the "
                 "query is the user's turns so far, the newest counted the weight's times "
                 "more; the server's weight is the last row): turns whose every called "
                 "function is offered, and the functions offered:", "", table(multi),
                 ""] if multi else []
    return Rendered(
        sections=[f"BFCL multiple: {results['questions']} questions, one catalog of "
                  f"{results['catalog']} functions. Share of questions whose function is "
                  "among the tools offered:", "", table(recall), "",
                  "![recall against k](tool-selection-recall.png)", "", *dialogues],
        images={"tool-selection-recall.png": png(draw)},
        headline=f"BM25 as served offers the right tool in the top {middle} for "
                 f"{served[f'recall@{middle}']:.1%} of {results['questions']} questions")


def schemas(results: dict[str, Any]) -> Rendered:
    rows = []
    for backend, data in results["backends"].items():
        for category, cat in data["categories"].items():
            s = cat["summary"]
            rows.append({"category": category, "backend": f"{backend} {data['version']}",
                         "schemas": s["schemas"], "coverage": f"{s['coverage']:.1%}",
                         "alone": f"{s['alone_coverage']:.1%}",
                         "compile p50 / p99 ms": f"{s['compile_ms_p50']:.1f} / "
                                                 f"{s['compile_ms_p99']:.0f}",
                         "hit ms": s["warm_ms_p50"],
                         "valid accepted": f"{s['valid_accepted']} of {s['valid_instances']}",
                         "by policy": s.get("valid_refused_by_policy", 0),
                         "invalid rejected": f"{s['invalid_rejected']} of "
                                             f"{s['invalid_instances']}"})

    def draw(ax: Any) -> None:
        labels = [f"{r['category']}\n{r['backend'].split()[0]}" for r in rows]
        ax.bar(labels, [float(r["coverage"][:-1]) for r in rows], label="served")
        ax.plot(labels, [float(r["alone"][:-1]) for r in rows], "ko", label="backend alone")
        ax.set_ylabel("schemas compiled, %")
        ax.set_ylim(0, 105)
        ax.tick_params(axis="x", labelsize=7)
        ax.legend(fontsize=7)

    valid = sum(int(r["valid accepted"].split()[0]) for r in rows)
    valid_all = sum(int(r["valid accepted"].split()[-1]) for r in rows)
    summaries = [cat["summary"] for data in results["backends"].values()
                 for cat in data["categories"].values()]
    schemas_n = sum(s["schemas"] for s in summaries)
    head = (f"{valid} of {valid_all} valid test instances accepted by the mask and the "
            f"validator, over {schemas_n} schemas")
    if all(s.get("valid_instances_all") is not None for s in summaries):
        head = (f"{valid} of {sum(s['valid_instances_all'] for s in summaries)} valid test "
                f"instances of {schemas_n} schemas served (accepted by the mask and the "
                f"validator); not served: "
                f"{sum(s['valid_refused_by_policy'] for s in summaries)} refused by policy, "
                f"{sum(s['valid_in_uncompiled'] for s in summaries)} in the "
                f"{sum(s['schemas'] - s['compiled'] for s in summaries)} schemas refused, "
                f"{valid_all - valid} refused otherwise")
    args = results["args"]
    return Rendered(
        sections=[f"First {args['limit']} schemas of each category; policies: "
                  + ", ".join(f"{k} {v}" for k, v in args.items()
                              if k not in ("dirs", "limit", "timeout")) + ".", "",
                  table(rows), "", "![coverage per category](schemas-coverage.png)", ""],
        images={"schemas-coverage.png": png(draw)},
        headline=head)


def contract_repair(results: dict[str, Any]) -> Rendered:
    s = results["summary"]
    rows = [{k: v for k, v in r.items() if k != "arguments"} for r in results["rows"]]
    return Rendered(
        sections=[table([s]), "", "### Each prompt", "", table(rows), ""],
        headline=f"{s['count_first_attempt']} of {s['prompts']} calls valid at the first "
                 f"attempt, {s['count_repaired']} repaired, {s.get('count_needs_input', 0)} "
                 f"asked for a missing value, {s['count_422']} ended in a 422, "
                 f"{s['count_cut_off']} cut off")


def runaway(results: list[dict[str, Any]]) -> Rendered:
    by_guard: dict[str, list[dict[str, Any]]] = {}
    for row in results:
        by_guard.setdefault(row["guards"], []).append(row)
    cut = {g: sum(r["cut_off"] * r["n"] for r in rs) / sum(r["n"] for r in rs)
           for g, rs in by_guard.items()}
    calls = sum(r["n"] for r in next(iter(by_guard.values())))
    changed = [f"{g} changed {sum(r['changed'] for r in rs)} ("
               f"{sum(r['fixed'] for r in rs)} fixed, {sum(r['broke'] for r in rs)} broken)"
               for g, rs in by_guard.items() if all("changed" in r for r in rs)]
    return Rendered(sections=[table(results), ""],
                    headline="cut off: " + ", ".join(f"{g} {c:.0%}" for g, c in cut.items())
                             + f" of {calls} forced calls each"
                             + ("; against off, " + ", ".join(changed) if changed else ""))


def bfcl(results: dict[str, Any]) -> Rendered:
    from bench.accuracy.bfcl import table as bfcl_table

    rows = [r for r in results["rows"] if r.get("status") != "unsupported"]

    def draw(ax: Any) -> None:
        labels = [f"{r['category']}\n{r['setting']}" for r in rows]
        ax.bar(labels, [100 * r["ast_accuracy"] for r in rows])
        ax.set_ylabel("AST accuracy, %")
        ax.tick_params(axis="x", labelsize=6, rotation=60)

    constrained = [r for r in rows if r["setting"] == "constrained"]
    head = ", ".join(f"{r['category']} {r['ast_accuracy']:.0%}" for r in constrained)
    return Rendered(
        sections=[f"max_tokens {results['max_tokens']}, model {results['model']}.", "",
                  bfcl_table(results["rows"]), "", "![AST accuracy](bfcl-accuracy.png)", ""],
        images={"bfcl-accuracy.png": png(draw, size=(7.5, 4.5))},
        headline=f"constrained AST accuracy: {head}" if head else "")


def bfcl_multi_turn(results: dict[str, Any]) -> Rendered:
    from bench.dialogue.bfcl_multi_turn import table as multi_turn_table

    args, rows = results["args"], results["rows"]
    head = ", ".join(f"{r['setting']} {r['dialogues_correct']} of {r['dialogues']} "
                     f"({r['turns_correct']} of {r['turns']} turns)" for r in rows)
    return Rendered(
        sections=[f"BFCL v4 multi_turn_base: {rows[0]['dialogues'] if rows else 0} "
                  f"dialogues from index {args['offset']}, one in {args.get('every', 1)}; "
                  f"at most {args['max_steps']} requests with calls per turn, max_tokens "
                  f"{args['max_tokens']}, model {args['model']}.", "",
                  multi_turn_table(rows), ""],
        headline=f"dialogues correct: {head}")


def grounding(results: dict[str, Any]) -> Rendered:
    from bench.dialogue.grounding import table as grounding_table

    latency = ", ".join(f"{k} {cell(v)} s" for k, v in sorted(results["latency_p50_s"].items()))
    # Invented over the fields nobody gave (the only ones that can be invented: invented,
    # asked for, or left empty), beside the errors (non-200 answers' fields, against).
    invented: dict[str, int] = {}
    unsaid: dict[str, int] = {}
    errors: dict[str, int] = {}
    answers: dict[str, int] = {}
    given: dict[str, int] = {}
    for row in results["rows"]:
        if row.get("by", "field") == "field":  # (each answer counted once)
            k = row["setting"]
            invented[k] = invented.get(k, 0) + row["invented"]
            unsaid[k] = unsaid.get(k, 0) + row["invented"] + row["asked_missing"] \
                + row["not_shown"]
            errors[k] = errors.get(k, 0) + row.get("error", 0)
            answers[k] = answers.get(k, 0) + row["answers"]
            given[k] = given.get(k, 0) + row["asked_given"]  # the weaker side: asked again
    sections = [grounding_table(results["rows"], by="field"), ""]
    if any(r.get("by") == "language" for r in results["rows"]):
        sections = [grounding_table(results["rows"], by="language"), "", *sections]
    return Rendered(sections=[*sections, f"Latency p50: {latency}.", ""],
                    headline="values invented of the fields nobody gave (judged by "
                    "hand-written values): " + ", ".join(
                        f"{k} {invented[k]} of {unsaid[k]} (errors: {errors[k]} of "
                        f"{answers[k]}; a given value asked for: {given[k]})"
                        for k in sorted(invented)))


def auto_mode(results: dict[str, Any]) -> Rendered:
    fits, none = results["when_a_tool_fits"], results["when_no_tool_fits"]
    summary = {k: v for k, v in results.items() if k != "rows"}
    rows = results.get("rows", {})
    each = [{"case": case, **r} for case, key in (("a tool fits", "fit"),
                                                  ("no tool fits", "no_fit"))
            for r in rows.get(key, [])]
    model = f"{results['model']}, " if results.get("model") else ""

    def count(s: dict[str, Any]) -> str:
        return f"{round(s['called_a_tool_rate'] * s['prompts'])} of {s['prompts']}"

    valid = ("every call valid" if fits["valid_call_rate"] in (1, None)
             and none["valid_call_rate"] in (1, None) else "not every call valid")
    return Rendered(sections=[generic(summary).sections[0], "",
                              table([{"case": "a tool fits", **fits},
                                     {"case": "no tool fits", **none}]), "",
                              *(["### Each prompt", "", table(each), ""] if each else [])],
                    headline=f"{model}--auto-tools {results['auto_tools']}: a call for "
                             f"{count(fits)} prompts a tool fits and for {count(none)} it "
                             f"does not; {valid}")


def agent_loop(results: dict[str, Any]) -> Rendered:
    rows = [{"setting": r["setting"], "server flags": " ".join(r["server_args"]),
             **{k: v for k, v in r["all"].items()}} for r in results["settings"]]
    per_choice = [{"setting": r["setting"], "first tool_choice": choice, **r[choice]}
                  for r in results["settings"] for choice in ("auto", "required")]
    return Rendered(sections=[table(rows), "", "By the first turn's tool_choice:", "",
                              table(per_choice), ""],
                    headline=f"loops ended in a text answer within {results['turns']} turns: "
                             + ", ".join(f"{r['setting']} {r['all']['ended_in_text']} of "
                                         f"{r['all']['runs']} ({r['all']['used_the_result']} "
                                         f"used the result)" for r in results["settings"]))


def schema_prompt(results: list[dict[str, Any]]) -> Rendered:
    layouts = {r.get("json_layout", "compact") for r in results if "json_layout" in r}

    def name(r: dict[str, Any]) -> str:  # the layout said only where the run compared two
        return f"schema {r['schema_prompt']}" + (
            f" {r.get('json_layout', 'compact')}" if len(layouts) > 1 else "")

    ours = {name(r): r for r in results if r.get("system", "strictcall") == "strictcall"}
    peer = next((r for r in results if r.get("system", "strictcall") != "strictcall"), None)
    head = ""
    if ours:
        head = f"AST accuracy over {max(r['n'] for r in ours.values())} BFCL json answers: " + \
            ", ".join(f"{k} {r['ast_accuracy']:.0%} ({r['prompt_tokens_median']:.0f} "
                      f"tokens)" for k, r in ours.items())
        if peer is not None:
            head += f"; {peer['system']} {peer['ast_accuracy']:.0%}"
    return Rendered(sections=[table(results), ""], headline=head)


RENDERERS: dict[str, Callable[[Any], Rendered]] = {
    "tool-selection": tool_selection, "schemas": schemas, "cold-compile": cold_compile,
    "decode-speed": decode_speed, "contract-repair": contract_repair, "runaway": runaway,
    "cpu-variants": cpu_variants, "latency": latency, "bfcl": bfcl, "gpu-decode": gpu_decode,
    "bfcl-multi-turn": bfcl_multi_turn, "bfcl-peer": bfcl_peer, "bfcl-missing": bfcl_missing,
    "grounding": grounding, "auto-mode": auto_mode, "schema-prompt": schema_prompt,
    "agent-loop": agent_loop,
    "load": load, "serve": serve, "vllm-engine": vllm_engine, "memory": memory,
    "decode-step": decode_step,
}
__all__ = ["RENDERERS", "generic"]
