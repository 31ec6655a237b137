"""Resident memory and start-up beside llama.cpp's own C++ `llama-server`: each system is
started alone, asked one json question, then more, and its RSS read at each point (Linux
/proc), with StrictCall's own account of what it sized (`/health` `memory`).

    strictcall-bench memory [--requests 8] [--systems default,one-row,...] [--save]

The peer, `llama-server` (`make setup-peers`), runs StrictCall's defaults: the same GGUF,
one thread, one slot per row of StrictCall's default batch (`-np 2`) over the same
8192-token unified context (`-c 8192 --kv-unified`). llama-cpp-python's Python server
(`llamacpp-server`, its n_ctx 2048) is a second row, as what it is.

StrictCall's systems (`strictcall serve --engine llamacpp`):
- default: no flags but the engine's (the model's own 8192-token context, 2 rows): the one
  compared with llama-server;
- one-row: `--max-batch 1 --max-model-len 2048`, the Python server's context;
- one-row-prefix-off: and `--prefix-cache-mb 0` (no prompt beginnings kept);
- two-rows: `--max-batch 2 --max-model-len 2048`: what one more row costs.
The ratio is each system's RSS over llama-server's at the same point of the run, and its
time to ready over llama-server's.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

from bench.common.markdown_table import table as markdown_table
from bench.common.results_file import add_save_flag, save
from bench.speed.latency_systems import (
    PEER_CONTEXT,
    RunningServer,
    Skipped,
    Where,
    find_gguf,
    launch_for,
)
from bench.speed.latency_workload import build_body, load_prompts
from server.model_store import default_cache_dir, embedded_model_dir

PEER = "llama-server"
PEERS = (PEER, "llamacpp-server")  # the C++ server; llama-cpp-python's, as a second row
DEFAULT_ROWS = 2  # StrictCall's default --max-batch: llama-server's slots
_CONTEXT = ("--max-model-len", str(PEER_CONTEXT))
CONFIGS: dict[str, tuple[str, ...]] = {
    "one-row": ("--engine", "llamacpp", "--max-batch", "1", *_CONTEXT),
    "one-row-prefix-off": ("--engine", "llamacpp", "--max-batch", "1",
                           "--prefix-cache-mb", "0", *_CONTEXT),
    "two-rows": ("--engine", "llamacpp", "--max-batch", "2", *_CONTEXT),
    "default": ("--engine", "llamacpp"),
}
DEFAULT_SYSTEMS = ("default", "one-row")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="strictcall-bench memory", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--systems", default=",".join(DEFAULT_SYSTEMS),
                   help=f"StrictCall configurations, of {', '.join(CONFIGS)}")
    p.add_argument("--requests", type=int, default=8,
                   help="json questions after the first (BFCL simple_python)")
    p.add_argument("--gguf", type=Path, help="the model's GGUF (default: found in the cache)")
    p.add_argument("--llamacpp-python", type=Path, default=Path(sys.executable))
    p.add_argument("--startup-s", type=float, default=300)
    add_save_flag(p)
    args = p.parse_args(argv)
    names = [n for n in args.systems.split(",") if n]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        raise SystemExit(f"unknown system {unknown[0]!r}; use {', '.join(CONFIGS)}")
    rows = run(names, args)
    print(markdown_table(*table_of(rows)))
    if args.save:
        save("memory", {"context": PEER_CONTEXT, "requests": 1 + args.requests,
                        "systems": rows}, argv)
    return 0


def run(names: list[str], args: argparse.Namespace) -> list[dict[str, Any]]:
    cache = default_cache_dir()
    where = Where(model_dir=embedded_model_dir(cache), gguf=args.gguf or find_gguf(cache),
                  vllm_python=Path(sys.executable),
                  llamacpp_python=args.llamacpp_python.absolute(), slots=DEFAULT_ROWS,
                  variants=tuple((f"strictcall-{n}", CONFIGS[n]) for n in names))
    prompts = load_prompts(["simple_python"], 1 + args.requests)
    rows = []
    with tempfile.TemporaryDirectory(prefix="strictcall-memory-") as scratch:
        for name in [*PEERS, *(f"strictcall-{n}" for n in names)]:  # one at a time, alone
            print(f"measuring {name} ...", file=sys.stderr)
            try:
                rows.append(measure(name, where, prompts, args.startup_s, Path(scratch)))
            except Skipped as skip:
                rows.append({"name": name, "skipped": skip.reason, "install": skip.install})
    peer = next((r for r in rows if r["name"] == PEER and "skipped" not in r), None)
    for row in rows:
        if peer is not None and "skipped" not in row:
            for point in ("ready", "first", "last"):
                row[f"{point}_ratio"] = round(row[f"{point}_mib"] / peer[f"{point}_mib"], 2)
            if peer["ready_s"]:
                row["ready_s_ratio"] = round(row["ready_s"] / peer["ready_s"], 2)
    return rows


def measure(name: str, where: Where, prompts: list[Any], startup_s: float,
            scratch: Path) -> dict[str, Any]:
    launch = launch_for(name, where)
    with RunningServer(launch, startup_s=startup_s, scratch=scratch) as server:
        row: dict[str, Any] = {"name": name, "command": launch.shown(),
                               "ready_s": round(server.ready_s or 0.0, 2),
                               "ready_mib": _rss(server)}
        with httpx.Client(base_url=server.base_url, timeout=300) as client:
            for i, prompt in enumerate(prompts):
                body = {**build_body(prompt, "json", dialect=launch.dialect, max_tokens=128),
                        "stream": False}
                body.pop("stream_options")
                answer = client.post("/v1/chat/completions", json=body)
                answer.raise_for_status()
                if i == 0:
                    row["first_mib"] = _rss(server)
            row["last_mib"] = _rss(server)
            row["peak_mib"] = round(server.memory().get("peak_rss_mib", 0.0), 1)
            if not launch.peer:
                sized = client.get("/health").json().get("memory", {})
                row["sized_mib"] = {k[:-len("_bytes")]: round(v / 2**20, 1)
                                    for k, v in sized.items() if k.endswith("_bytes")
                                    and k not in ("rss_bytes", "peak_rss_bytes")}
    return row


def _rss(server: RunningServer) -> float:
    return round(server.memory().get("rss_mib", 0.0), 1)


def table_of(rows: list[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    header = ["system", "ready s", "RSS MiB ready", "after 1 json", "after all",
              f"ready s / {PEER}'s", "RSS ratio ready", "after 1", "after all"]
    body = [[r["name"], "skipped: " + r["skipped"], "", "", "", "", "", "", ""]
            if "skipped" in r
            else [r["name"], r["ready_s"], r["ready_mib"], r["first_mib"], r["last_mib"],
                  r.get("ready_s_ratio", ""), r.get("ready_ratio", ""),
                  r.get("first_ratio", ""), r.get("last_ratio", "")]
            for r in rows]
    return header, body
