"""`strictcall-bench` (or `python -m bench`): the benchmarks' own entry point. The server's
command line does not import `bench`; this one hands each benchmark its own flags whole.

    strictcall-bench schemas DIR... [--out REPORT.json] [--backend xgrammar,llguidance,outlines]
    strictcall-bench decode-speed
    strictcall-bench load [--clients 8] [--minutes 2] [--runs 1]
    strictcall-bench bfcl [--limit 20] [--settings unconstrained,constrained,reasoning]
    strictcall-bench bfcl-multi-turn [--limit 10] [--max-steps 5] [--url URL]
    strictcall-bench bfcl-peer [--model qwen2.5-coder-0.5b] [--limit 20] [--save]
    strictcall-bench bfcl-missing [--model qwen2.5-coder-0.5b] [--limit 20] [--save]
    strictcall-bench cpu-variants [--rounds 3] [--variants fp32,int8,compile,llamacpp]
    strictcall-bench tool-selection [--ks 3,5,10]
    strictcall-bench vllm-engine     (in .venv-vllm)
    strictcall-bench latency [--systems strictcall-torch,llamacpp-server] [--concurrency 1,4]
    strictcall-bench gpu-decode [--tiny]
    strictcall-bench serve --target NAME=URL [--workload ...] [--rate 1,2] [--concurrency 4]
    strictcall-bench serve compare A.json B.json
    strictcall-bench grounding [--sampled 2]
    strictcall-bench memory [--requests 8] [--systems one-row,two-rows,default]
    strictcall-bench agent-loop [--settings answer-first,auto] [--turns 3]
"""

from __future__ import annotations

import importlib
import sys

# The benchmarks by what they measure, each package naming its own (its BENCHMARKS: name ->
# module with a `main(argv) -> int`); `serve`, the deployment benchmark, is its own package.
PACKAGES = ("bench.speed", "bench.accuracy", "bench.dialogue")
BENCHMARKS = {"serve": "bench.serve", **{
    name: f"{package}.{module}" for package in PACKAGES
    for name, module in importlib.import_module(package).BENCHMARKS.items()}}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in BENCHMARKS:
        print(f"usage: strictcall-bench {{{','.join(BENCHMARKS)}}} [flags...]; each benchmark "
              "takes --help", file=sys.stderr)
        return 2
    module = importlib.import_module(BENCHMARKS[argv[0]])
    return int(module.main(argv[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main())
