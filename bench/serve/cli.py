"""Benchmark OpenAI-compatible endpoints that are already running, the way vLLM's `bench
serve`, SGLang's `bench_serving` and genai-perf do, and check every answer against its
schema.

    strictcall-bench serve --target NAME=URL[,model=M][,api-key-env=VAR][,dialect=D] ...
        [--workload bfcl-forced,bfcl-json,... | --workload my-requests.jsonl]
        [--rate 1,2,4] [--concurrency 1,4] [--arrivals poisson|constant]
        [--num-requests 32 | --duration 60] [--warmup 1] [--interleave requests|settings]
        [--slo ttft_ms=500,e2e_ms=2000] [--max-tokens N] [--extra-body JSON]
        [--out bench/results/serve]
    strictcall-bench serve compare A.json B.json [--out diff.md]

Workloads (bench/serve/workload.py, bench/serve/userfile.py): bfcl-forced, bfcl-auto,
bfcl-json, bfcl-free, contracts, synthetic-text, synthetic-tool, synthetic-json, or a JSONL
file of your own Chat Completions, Responses or Messages bodies; several are mixed, taken
in turn. Load (bench/serve/schedule.py, bench/serve/runner.py): each --rate (open loop,
Poisson or constant arrivals) and each --concurrency (closed loop) is a setting, run for
--num-requests requests or --duration seconds per target, after --warmup requests per
target. Every request is streamed. Output under --out: serve.json (the command, targets,
workload hash, machine, and per target and setting the numbers; bench/serve/stats.py),
records.jsonl (one raw record per request), serve.md and serve.png.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import sys
from pathlib import Path
from typing import Any

import httpx

from bench.common.results_file import add_save_flag, save
from bench.serve import report
from bench.serve.compare import markdown as compare_markdown
from bench.serve.runner import LoadPlan, run
from bench.serve.schedule import SettingError, parse_settings
from bench.serve.stats import SloError, parse_slo
from bench.serve.targets import Target, TargetError, parse_targets
from bench.serve.userfile import UserFileError, load_user_file
from bench.serve.validity import BodyError
from bench.serve.workload import SHIPPED, Sources, WorkItem, mixed, shipped

DEFAULT_REQUESTS = 32


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["compare"]:
        return _compare(argv[1:])
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        plan = _plan(args)
        slo = parse_slo(args.slo)
        names = [n for w in args.workload for n in w.split(",") if n]
        items = load_items(names or ["bfcl-forced"], _sources(args))
        targets = [_with_model(t) for t in parse_targets(args.target,
                                                          default_model=args.model or "")]
    except (TargetError, SettingError, SloError, UserFileError, BodyError, ValueError,
            OSError) as exc:
        parser.error(str(exc))
    outcome = asyncio.run(run(targets, items, plan))
    result = report.build(command=shlex.join(["strictcall-bench", "serve", *argv]),
                          targets=targets, workloads=names or ["bfcl-forced"], items=items,
                          plan=plan, slo=slo, outcome=outcome)
    paths = report.write(result, outcome.records, args.out)
    if args.save:  # the summary, not the per-request records (those stay under --out)
        save("serve", result, argv)
    print(paths["markdown"].read_text())
    print(f"results: {', '.join(str(p) for p in paths.values())}", file=sys.stderr)
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="strictcall-bench serve", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", action="append", default=[], required=True,
                   help="NAME=URL[,model=M][,api-key-env=VAR][,dialect=openai|strictcall|"
                        "llamacpp]; repeat for each endpoint")
    p.add_argument("--model", help="the model for targets that name none (default: the "
                                   "first of each target's GET /v1/models)")
    p.add_argument("--workload", action="append", default=[],
                   help=f"of {', '.join(SHIPPED)}, or a .jsonl file; comma-separated or "
                        "repeated (default bfcl-forced)")
    p.add_argument("--rate", help="requests/s per target, e.g. 1,2,4,inf (open loop)")
    p.add_argument("--concurrency", help="clients per target, e.g. 1,4 (closed loop)")
    p.add_argument("--arrivals", choices=("poisson", "constant"), default="poisson")
    p.add_argument("--num-requests", type=int, help=f"per target and setting (default "
                                                    f"{DEFAULT_REQUESTS} without --duration)")
    p.add_argument("--duration", type=float, help="seconds per target and setting")
    p.add_argument("--warmup", type=int, default=1, help="requests per target, unreported")
    p.add_argument("--interleave", choices=("requests", "settings"), default="requests",
                   help="requests: all targets loaded at once (own hardware each); settings: "
                        "one target at a time (targets sharing a GPU)")
    p.add_argument("--slo", help="e.g. ttft_ms=500,e2e_ms=2000 (keys ttft_ms, tpot_ms, "
                                 "e2e_ms) for goodput")
    p.add_argument("--max-tokens", type=int, help="set in every request (default: shipped "
                                                  "workloads 128, your file's own)")
    p.add_argument("--extra-body", type=json.loads, default={},
                   help='JSON merged into every request, e.g. \'{"ignore_eos": true}\'')
    p.add_argument("--timeout", type=float, default=600, help="seconds per request")
    p.add_argument("--seed", type=int, default=0, help="for arrivals and synthetic prompts")
    p.add_argument("--out", type=Path, default=Path("bench/results/serve"))
    add_save_flag(p)
    _add_source_flags(p)
    return p


def _add_source_flags(p: argparse.ArgumentParser) -> None:
    """Where the shipped workloads come from, and their sizes."""
    p.add_argument("--bfcl-dir", type=Path, help="BFCL's folder (BFCL_v4_*.json and "
                                                 "possible_answer/); default beside the "
                                                 "checkout: ../shared/evaldata/bfcl")
    p.add_argument("--bfcl-categories", default="simple_python")
    p.add_argument("--bfcl-limit", type=int, default=16, help="BFCL questions")
    p.add_argument("--scenarios-dir", type=Path, help="contract scenario files (default "
                                                      "contracts/scenarios)")
    p.add_argument("--input-len", type=int, default=256, help="synthetic prompt words")
    p.add_argument("--output-len", type=int, default=64, help="synthetic max_tokens")
    p.add_argument("--synthetic-count", type=int, default=16)


def _plan(args: argparse.Namespace) -> LoadPlan:
    for flag, value in (("--num-requests", args.num_requests), ("--duration", args.duration),
                        ("--max-tokens", args.max_tokens), ("--timeout", args.timeout)):
        if value is not None and value <= 0:
            raise SettingError(f"{flag} {value}: must be above 0")
    if args.warmup < 0:
        raise SettingError(f"--warmup {args.warmup}: 0 or more")
    if not isinstance(args.extra_body, dict):
        raise SettingError("--extra-body must be a JSON object, e.g. '{\"ignore_eos\": true}'")
    count = args.num_requests if args.num_requests or args.duration else DEFAULT_REQUESTS
    concurrency = args.concurrency if args.rate or args.concurrency else "1"
    return LoadPlan(settings=parse_settings(args.rate, concurrency), count=count,
                    duration_s=args.duration, arrivals=args.arrivals, warmup=args.warmup,
                    interleave=args.interleave, seed=args.seed, max_tokens=args.max_tokens,
                    extra_body=args.extra_body, timeout_s=args.timeout)


def _sources(args: argparse.Namespace) -> Sources:
    defaults = Sources()
    return Sources(bfcl_dir=args.bfcl_dir or defaults.bfcl_dir,
                   bfcl_categories=tuple(c for c in args.bfcl_categories.split(",") if c),
                   bfcl_limit=args.bfcl_limit,
                   scenarios_dir=args.scenarios_dir or defaults.scenarios_dir,
                   max_tokens=args.max_tokens or defaults.max_tokens,
                   input_len=args.input_len, output_len=args.output_len,
                   synthetic_count=args.synthetic_count, seed=args.seed)


def load_items(names: list[str], sources: Sources) -> list[WorkItem]:
    """Every named workload's items, mixed; a name that is a file is a user's JSONL."""
    groups = []
    for name in names:
        if name in SHIPPED:
            try:
                groups.append(shipped(name, sources))
            except FileNotFoundError as exc:
                raise ValueError(f"workload {name!r}: {exc.filename} is missing; pass "
                                 "--bfcl-dir (BFCL's folder)") from None
        elif name.endswith(".jsonl") or Path(name).exists():
            groups.append(load_user_file(Path(name)))
        else:
            raise ValueError(f"unknown workload {name!r}; use one of {', '.join(SHIPPED)} "
                             "or a .jsonl file of your own requests")
    items = mixed(groups)
    if not items:
        raise ValueError(f"the workloads {', '.join(names)} have no requests")
    return items


def _with_model(target: Target) -> Target:
    """The target as given, or with the first model its GET /v1/models lists; its API key's
    variable checked either way."""
    headers = target.headers()
    if target.model:
        return target
    try:
        resp = httpx.get(f"{target.root}/v1/models", headers=headers, timeout=30)
        model = resp.json()["data"][0]["id"]
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
        raise TargetError(f"target {target.name!r}: could not read a model from "
                          f"{target.root}/v1/models ({type(exc).__name__}: {exc}); name it: "
                          f"--target {target.name}=URL,model=M") from None
    return Target(target.name, target.root, str(model), target.api_key_env, target.dialect)


def _compare(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="strictcall-bench serve compare",
                                description="Two serve.json files side by side.")
    p.add_argument("a", type=Path)
    p.add_argument("b", type=Path)
    p.add_argument("--out", type=Path, help="also write the markdown here")
    args = p.parse_args(argv)
    docs: list[Any] = []
    for path in (args.a, args.b):
        try:
            docs.append(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            p.error(f"{path}: {exc}")
        if not isinstance(docs[-1], dict) or "settings" not in docs[-1]:
            p.error(f"{path}: not a strictcall-bench serve result (no \"settings\")")
    text = compare_markdown(docs[0], docs[1], names=(str(args.a), str(args.b)))
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0
