"""`strictcall-bench serve`: latency, throughput, goodput and answer validity of running
OpenAI-compatible endpoints (StrictCall, vLLM, SGLang, llama.cpp's server, ...), over HTTP
only. bench/serve/cli.py has the flags; docs/bench-serve.md says how to use it on a GPU node.

Nothing here imports torch, xgrammar or the server's packages: the benchmark runs where only
httpx, jsonschema, pydantic, pyyaml, matplotlib and tqdm are installed
(bench/requirements-serve.txt).
"""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    from bench.serve.cli import main as run

    return run(argv)
