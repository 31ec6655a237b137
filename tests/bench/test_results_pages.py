"""Benchmark results as data: the one writer (bench/common/results_file.py) records the command,
commit and machine beside the results, and the docs' benchmark pages are rendered from
those files alone (bench/report/pages.py), so a new or rerun results file changes the pages."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from bench.common.results_file import page_name, save
from bench.report.page_parts import Rendered
from bench.report.pages import benchmark_pages, read_results

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"


def _saved(tmp_path: Path, name: str, results: object) -> dict:
    path = save(name, results, ["--rounds", "2", "--save"], directory=tmp_path)
    return json.loads(path.read_text())


def test_a_results_file_holds_the_command_commit_and_machine(tmp_path: Path) -> None:
    record = _saved(tmp_path, "frob-speed", {"rows": [{"k": 1, "tok_s": 7.25}]})
    assert record["benchmark"] == "frob-speed"
    assert record["command"] == "strictcall-bench frob-speed --rounds 2"  # --save left out
    assert re.fullmatch(r"[0-9a-f]{40}(\+dirty)?", record["commit"])
    machine = record["machine"]
    assert machine["cores"] >= 1 and machine["python"].count(".") == 2
    assert "xgrammar" in machine["packages"]


def test_a_new_results_file_is_a_new_page_and_an_index_row(tmp_path: Path) -> None:
    before = benchmark_pages(read_results(tmp_path))
    _saved(tmp_path, "frob-speed", {"rows": [{"k": 1, "tok_s": 7.25}, {"k": 2, "tok_s": 3.5}]})
    after = benchmark_pages(read_results(tmp_path))
    assert "benchmarks/frob-speed.md" not in before
    page = after["benchmarks/frob-speed.md"]
    assert "`strictcall-bench frob-speed --rounds 2`" in page
    assert "| 1 | 7.25 |" in page and "| 2 | 3.5 |" in page  # the generic table
    assert "[frob-speed](frob-speed.md)" in str(after["benchmarks/index.md"])


def test_a_rerun_changes_the_page(tmp_path: Path) -> None:
    _saved(tmp_path, "frob-speed", {"tok_s": 7.25})
    first = benchmark_pages(read_results(tmp_path))["benchmarks/frob-speed.md"]
    _saved(tmp_path, "frob-speed", {"tok_s": 9.5})
    second = benchmark_pages(read_results(tmp_path))["benchmarks/frob-speed.md"]
    assert "7.25" in str(first) and "9.5" in str(second) and "7.25" not in str(second)


def test_every_committed_results_file_renders_with_its_run() -> None:
    records = read_results(RESULTS)
    assert records, "bench/results/ holds no results file"
    pages = benchmark_pages(records)
    for record in records:
        page = str(pages[f"benchmarks/{page_name(record)}.md"])
        assert record["command"] in page and record["commit"] in page
        for image in re.findall(r"!\[[^]]*\]\(([^)]+\.png)\)", page):
            png = pages[f"benchmarks/{image}"]
            assert isinstance(png, bytes) and png.startswith(b"\x89PNG")


def test_a_variant_is_kept_beside_the_default_run_with_its_own_plots(tmp_path, monkeypatch):
    from bench.report import pages as pages_module

    def plotted(results: dict) -> Rendered:
        return Rendered(sections=[f"{results['tok_s']} ![p](latency-p.png)"],
                        images={"latency-p.png": b"\x89PNG" + str(results["tok_s"]).encode()})

    monkeypatch.setitem(pages_module.RENDERERS, "frob", plotted)
    save("frob", {"tok_s": 1.5}, [], directory=tmp_path)
    path = save("frob", {"tok_s": 2.5}, [], directory=tmp_path, variant="vllm")
    assert path.name == "frob-vllm.json" and (tmp_path / "frob.json").exists()
    pages = benchmark_pages(read_results(tmp_path))
    assert "1.5 ![p](latency-p.png)" in str(pages["benchmarks/frob.md"])
    assert "2.5 ![p](frob-vllm-latency-p.png)" in str(pages["benchmarks/frob-vllm.md"])
    assert pages["benchmarks/latency-p.png"] == b"\x89PNG1.5"  # not replaced by the variant's
    assert pages["benchmarks/frob-vllm-latency-p.png"] == b"\x89PNG2.5"


def test_the_nav_gets_each_benchmark_page_after_the_index() -> None:
    # mkdocs lives in the docs extra: not in the vLLM tier's venv, which collects this file
    from docsgen.hooks import with_benchmarks

    nav = [{"Home": "index.md"},
           {"Benchmarks": ["benchmarks/index.md", "benchmarks/kept.md", {"x": "bench-serve.md"}]}]
    out = with_benchmarks(nav, ["kept", "new"])
    assert out[1] == {"Benchmarks": ["benchmarks/index.md", "benchmarks/new.md",
                                     "benchmarks/kept.md", {"x": "bench-serve.md"}]}


def test_the_latency_headline_is_the_cold_pass_against_the_peer() -> None:
    from bench.report.page_speed import _cold_headline

    setting = {"system": "a", "kind": "json", "concurrency": 1, "pass": "cold", "n": 4,
               "valid": 4}
    results = {
        "systems": [{"name": "a", "status": "ran"}, {"name": "peer", "status": "ran"}],
        "settings": [setting, {**setting, "pass": "warm"},
                     {**setting, "kind": "forced"}, {**setting, "kind": "forced", "system": "peer",
                                                     "valid": 0}],
        "ratios": [{"ours": "a", "other": "peer", "kind": "json", "concurrency": c,
                    "pass": p, "e2e_ratio": r}
                   for c, p, r in ((1, "cold", 0.5), (4, "cold", 0.75), (1, "warm", 2.0))]}
    head = _cold_headline(results)
    assert head.startswith("cold pass, a / peer")
    assert "json 0.50x at 1, 0.75x at 4" in head and "2.00x" not in head  # warm left out
    assert "forced: no ratio, valid 4 of 4 against peer's 0 of 4" in head


def test_the_schema_prompt_headline_sets_the_peer_beside_each_rendering() -> None:
    from bench.report.page_kinds import schema_prompt

    row = {"n": 400, "prompt_tokens_median": 52, "ast_accuracy": 0.5}
    head = schema_prompt([{**row, "schema_prompt": "none", "system": "strictcall"},
                          {**row, "schema_prompt": "raw", "system": "strictcall",
                           "ast_accuracy": 0.6},
                          {**row, "schema_prompt": "peer", "system": "llama-server",
                           "ast_accuracy": 0.55}]).headline
    assert head == ("AST accuracy over 400 BFCL json answers: schema none 50% (52 "
                    "tokens), schema raw 60% (52 tokens); llama-server 55%")


def test_the_decode_step_page_puts_each_server_and_their_ratio() -> None:
    from bench.report.page_speed import decode_step

    summary = {name: {"n": 12, "ms_per_step_median": ms, "tokens_median": 128,
                      "own_ms_per_token_median": own}
               for name, ms, own in (("strictcall-llamacpp", 8.0, None),
                                     ("llama-server", 8.5, 8.4))}
    summary["ratio"] = {"ours": "strictcall-llamacpp", "other": "llama-server", "pairs": 12,
                        "median": 0.97}
    summary["strictcall-llamacpp"].update(steps_median=126, sampled_median=128, forced_median=0,
                                          forward_ms_per_step_median=7.9,
                                          host_ms_per_step_median=0.1)
    rendered = decode_step({"tokens": 128, "rounds": 3, "summary": summary})
    # per output token (126 model steps made 128), the median ratio beside the medians'
    assert rendered.headline == (
        "strictcall-llamacpp / llama-server per output token: median of 12 per-round ratios "
        "0.97x, ratio of medians 0.94x (8.00 against 8.50 ms); 126 model steps for 128 tokens")
    assert "| llama-server | free | 8.5 | 8.4 | - | - | 12 | 128 |" in rendered.sections[0]


def test_the_decode_step_page_shows_strictcalls_own_account_per_kind() -> None:
    from bench.report.page_speed import decode_step
    from bench.speed.decode_step import summarize

    rows = [{"system": "strictcall-llamacpp", "kind": kind, "round": 1, "prompt": 0,
             "tokens": 128, "ms_per_step": ms, "own_ms_per_token": None, "steps": steps,
             "sampled": steps, "forced": 128 - steps, "forward_ms_per_step": 7.0,
             "host_ms_per_step": host}
            for kind, ms, steps, host in (("free", 8.0, 128, 0.5), ("json", 6.0, 100, 0.9))]
    rendered = decode_step({"tokens": 128, "rounds": 1, "summary": summarize(rows)})
    table_ = rendered.sections[0]
    assert "| strictcall-llamacpp | free | 8 | - | 128 / 128 / 0 | 7.00 / 0.50 | 1 | 128 |" \
        in table_
    assert "| strictcall-llamacpp | json | 6 | - | 100 / 100 / 28 | 7.00 / 0.90 | 1 | 128 |" \
        in table_


def test_the_runaway_page_counts_what_each_guard_setting_changed_against_off() -> None:
    from bench.accuracy.runaway import _changed
    from bench.report.page_kinds import runaway as runaway_page

    off = [{"text": "a", "correct": False}, {"text": "b", "correct": True},
           {"text": "c", "correct": True}]
    steer = [{"text": "a2", "correct": True}, {"text": "b2", "correct": False},
             {"text": "c", "correct": True}]
    assert _changed(off, steer) == {"changed": 2, "fixed": 1, "broke": 1}
    row = {"category": "simple_python", "n": 3, "cut_off": 0.0, "valid": 1.0,
           "ast_accuracy": 2 / 3, "mean_s": 1.0, "mean_tokens": 20.0}
    head = runaway_page([{**row, "guards": "off"},
                         {**row, "guards": "steer", **_changed(off, steer)}]).headline
    assert head == ("cut off: off 0%, steer 0% of 3 forced calls each; against off, "
                    "steer changed 2 (1 fixed, 1 broken)")


def test_the_schema_prompt_headline_names_the_layout_where_a_run_compared_two() -> None:
    from bench.report.page_kinds import schema_prompt

    row = {"n": 400, "prompt_tokens_median": 51, "schema_prompt": "none",
           "system": "strictcall"}
    head = schema_prompt([{**row, "json_layout": "compact", "ast_accuracy": 0.25},
                          {**row, "json_layout": "spaced", "ast_accuracy": 0.3}]).headline
    assert head == ("AST accuracy over 400 BFCL json answers: schema none compact 25% (51 "
                    "tokens), schema none spaced 30% (51 tokens)")


def test_a_dirty_tree_is_never_saved_into_the_committed_results(monkeypatch) -> None:
    """Provenance: a headline measured on uncommitted code cannot be traced to a commit."""
    import bench.common.results_file as results_file

    monkeypatch.setattr(results_file, "commit", lambda: "0123456789abcdef+dirty")
    with pytest.raises(SystemExit, match="not saved: the measured code"):
        results_file.save("frob", {"tok_s": 1.5}, [])
    assert not (results_file.RESULTS_DIR / "frob.json").exists()


def test_a_page_says_when_the_code_it_measured_has_changed_since(tmp_path: Path) -> None:
    """The run's commit against HEAD, by git: the page warns and the index marks the
    headline; an unchanged commit says nothing; a dirty or unknown commit says so."""
    from bench.report.pages import changed_since

    _saved(tmp_path, "frob-speed", {"tok_s": 7.25})
    warned = benchmark_pages(read_results(tmp_path),
                             changed=lambda commit: "server/ changed since 0123 (3 files)")
    assert "!!! warning \"Measured on older code\"" in str(warned["benchmarks/frob-speed.md"])
    assert "(measured on older code: server/ changed since 0123 (3 files)) |" in str(
        warned["benchmarks/index.md"])
    quiet = benchmark_pages(read_results(tmp_path), changed=lambda commit: None)
    assert "older code" not in str(quiet["benchmarks/frob-speed.md"])
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=RESULTS, capture_output=True,
                          text=True, check=True).stdout.strip()
    assert changed_since(head) is None  # the measured code at HEAD is HEAD's
    first = subprocess.run(["git", "rev-list", "--max-parents=0", "HEAD"], cwd=RESULTS,
                           capture_output=True, text=True, check=True).stdout.split()[0]
    if first != head:  # a shallow clone holds HEAD alone
        assert re.fullmatch(r".*server/.* changed since [0-9a-f]{12} \(\d+ files\)",
                            changed_since(first) or "")
    assert changed_since(head + "+dirty") == f"run on uncommitted changes to {head[:12]}"
    assert changed_since("0" * 40) == f"commit {'0' * 12} is not in this history"


def test_the_auto_mode_page_names_the_model_counts_and_each_prompt() -> None:
    from bench.report.page_kinds import auto_mode

    def case(called: int, n: int) -> dict:
        return {"prompts": n, "called_a_tool_rate": called / n, "answered_in_text_rate":
                (n - called) / n, "cut_off_rate": 0.0, "emitted_calls": called,
                "valid_call_rate": 1.0 if called else None}

    rendered = auto_mode({"auto_tools": "decide", "model": "qwen.gguf",
                          "when_a_tool_fits": case(3, 4), "when_no_tool_fits": case(0, 2),
                          "rows": {"fit": [{"prompt": "simple_python_0", "finish": "stop",
                                            "calls": 0, "valid_calls": 0, "tools": [],
                                            "tokens": 9}],
                                   "no_fit": [{"prompt": "Hi!", "finish": "stop", "calls": 0,
                                               "valid_calls": 0, "tools": [], "tokens": 5}]}})
    assert rendered.headline == ("qwen.gguf, --auto-tools decide: a call for 3 of 4 prompts "
                                 "a tool fits and for 0 of 2 it does not; every call valid")
    assert "| no tool fits | Hi! | stop | 0 |" in "\n".join(rendered.sections)


def test_the_bfcl_missing_headline_counts_the_questions_and_names_only_what_went_wrong() -> None:
    from bench.report.page_peers import bfcl_missing

    def row(system: str, grounding: str, **counts: int) -> dict:
        return {"system": system, "grounding": grounding, "n": 20, "question": 0, "called": 0,
                "invented": 0, "call_as_text": 0, "cut_off": 0, **counts}

    rendered = bfcl_missing({"model": "qwen", "rows": [
        row("strictcall-llamacpp", "values", question=14, called=6),
        row("strictcall-llamacpp", "off", called=20, invented=7),
        row("llama-server", "off", call_as_text=9, cut_off=6)]})
    assert rendered.headline == (
        "qwen, asked where a value is missing (the right answer): StrictCall strings+numbers "
        "grounded 14/20 (6 called); nothing grounded 0/20 (20 called, 7 with a string nobody "
        "gave); llama-server 0/20 (0 called, 9 as text, 6 cut off)")
    # A run whose judge reads numbers too says "value": a count nobody gave is invented.
    judged = bfcl_missing({"model": "qwen", "invented_judge": "strings and numbers",
                           "rows": [row("strictcall-llamacpp", "on", question=17, called=3,
                                        invented=2)]})
    assert judged.headline.endswith("strings grounded 17/20 (3 called, 2 with a value nobody "
                                    "gave)")


def test_the_grounding_headline_counts_invented_over_what_could_be_and_asked_again() -> None:
    """Invented over the fields nobody gave, errors against, and the weaker side: a value
    the user gave and was asked for all the same."""
    from bench.report.page_kinds import grounding

    def row(setting: str, **counts: int) -> dict:
        zero = dict.fromkeys(("answers", "correct", "asked_given", "asked_missing", "invented",
                              "wrong", "changed", "left_out", "not_shown", "confirming",
                              "error"), 0)
        return {"setting": setting, "by": "field", "group": "amount", **zero, **counts}

    rendered = grounding({"latency_p50_s": {"grounding-on": 0.5}, "rows": [
        row("grounding-off", answers=10, invented=4, asked_missing=1, wrong=5),
        row("grounding-on", answers=10, correct=6, asked_given=2, asked_missing=2)]})
    assert rendered.headline == (
        "values invented of the fields nobody gave (judged by hand-written values): "
        "grounding-off 4 of 5 (errors: 0 of 10; a given value asked for: 0), "
        "grounding-on 0 of 2 (errors: 0 of 10; a given value asked for: 2)")
