"""Latency of tool calls and JSON answers, StrictCall beside its peers, in one run.

    strictcall-bench latency [--systems strictcall-torch,llamacpp-server] [--limit 8]
        [--kinds forced,json,free] [--concurrency 1,4] [--max-tokens 200]
        [--url URL] [--gguf PATH] [--vllm-python PATH] [--llamacpp-python PATH]
        [--out bench/results/latency]

Every system is a real server process on 127.0.0.1 started by the run (or, with --url, a
StrictCall server already running), the same model, one compute thread each. The workload is
BFCL questions with their functions (bench/speed/latency_workload.py): forced tool calls, auto
tool calls, json_schema answers, and the same json question unconstrained ("free"); greedy,
streamed, the same max_tokens for all. Requests alternate between systems, one wave of
`concurrency` requests at a time, the systems' order rotating from wave to wave, so that
noise on this machine hits every system alike. At each concurrency a cold pass (prompts no
server has seen: grammars compiled, prefixes prefilled) comes before the warm pass on the
same prompts; the two are reported apart, cold first.

Per setting: outcomes (valid, invalid, cut off at max_tokens, no call, error), median prompt
and completion tokens, TTFT, time per output token, end-to-end p50/p90/p99, requests/s and
tokens/s; ratios between systems as the median per-prompt ratio over prompts both answered
validly (bench/speed/latency_stats.py). Output under --out: latency.json, latency.md and PNG
plots (bench/speed/latency_report.py). Timings are for comparing in one run, not absolute.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import httpx

from bench.common.progress import Progress
from bench.common.results_file import add_save_flag, save
from bench.speed.latency_client import counter_delta, engine_counters, timed_request
from bench.speed.latency_like import print_like_with_like, prompt_tokens, tools_seen
from bench.speed.latency_overhead import print_upstream_overhead, upstream_overhead
from bench.speed.latency_report import build_report, print_ratios, write_report
from bench.speed.latency_stats import Sample, Wave
from bench.speed.latency_systems import (
    ROOT,
    SYSTEMS,
    UPSTREAM,
    Launch,
    RunningServer,
    Skipped,
    Where,
    find_gguf,
    launch_for,
)
from bench.speed.latency_workload import (
    DIALECT_KINDS,
    KINDS,
    MODEL,
    Dialect,
    Kind,
    Prompt,
    check,
    load_prompts,
    request_body,
)
from server.model_store import default_cache_dir, embedded_model_dir


@dataclass(frozen=True)
class LiveSystem:
    name: str
    dialect: Dialect
    peer: bool
    base_url: str
    memory: Callable[[], dict[str, float]] | None = None  # its process's RSS, MiB


@dataclass(frozen=True)
class Plan:
    prompts: list[Prompt]
    kinds: list[Kind]
    concurrencies: list[int]
    max_tokens: int
    cold_pass: bool

    def passes(self) -> list[tuple[str, int, list[Kind], list[Prompt]]]:
        """(pass, concurrency, kinds, prompts) in the order they run. With the cold pass,
        each concurrency has prompts of its own (`limit` each): asked once cold (no server
        has seen them: not their grammars, not their prefixes), then once more warm (each
        server has seen each exactly once, so each side's caches are warmed alike).
        Without it, every concurrency asks the same prompts, warm after the first."""
        if not self.cold_pass:
            return [("warm", c, self.kinds, self.prompts) for c in self.concurrencies]
        size = len(self.prompts) // max(len(self.concurrencies), 1)
        out: list[tuple[str, int, list[Kind], list[Prompt]]] = []
        for i, c in enumerate(self.concurrencies):
            own = self.prompts[i * size:(i + 1) * size]
            out += [("cold", c, self.kinds, own), ("warm", c, self.kinds, own)]
        return out


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    wanted = args.limit * (len(concurrencies) if args.cold_pass else 1)
    plan = Plan(load_prompts(args.categories.split(","), wanted),
                [_kind(k) for k in args.kinds.split(",")], concurrencies, args.max_tokens,
                args.cold_pass)
    if not plan.prompts:
        raise SystemExit("no BFCL questions found (is ../shared/evaldata there?)")
    statuses: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="strictcall-latency-") as scratch, \
            contextlib.ExitStack() as servers:
        live = _start(args, servers, Path(scratch), statuses)
        if not live:
            print("no system could start: " + "; ".join(
                f"{s['name']}: {s['reason']}" for s in statuses), file=sys.stderr)
            return 1
        if "forced" in plan.kinds:
            asyncio.run(_check_tools(live, plan.prompts[0], statuses))
        samples, timed_waves, counters = asyncio.run(measure(live, plan))
        _record_memory(live, statuses)
    report = build_report(vars(args), statuses, samples, timed_waves, counters)
    report["upstream_overhead"] = upstream_overhead(report)
    paths = write_report(report, args.out)
    if args.save:
        save("latency", report, argv, variant=args.save_variant)
    print(paths["markdown"].read_text())
    print_ratios(report)
    print_like_with_like(report["like_with_like"])
    print_upstream_overhead(report)  # strictcall-upstream beside vllm-server
    print(f"report: {', '.join(str(p) for p in paths.values())}", file=sys.stderr)
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="strictcall-bench latency", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--systems", default="strictcall-llamacpp,llama-server",
                   help=f"comma-separated, of {', '.join(SYSTEMS)}; or all")
    p.add_argument("--url", help="also measure the StrictCall server already at this URL")
    p.add_argument("--limit", type=int, default=8,
                   help="BFCL questions per concurrency (with the cold pass, each "
                        "concurrency asks its own)")
    p.add_argument("--categories", default="simple_python")
    p.add_argument("--kinds", default="forced,json,free", help=f"of {', '.join(KINDS)}")
    p.add_argument("--concurrency", default="1,4", help="e.g. 1,4,16")
    p.add_argument("--max-tokens", type=int, default=200)
    p.add_argument("--cold-pass", action=argparse.BooleanOptionalAction, default=True,
                   help="at each concurrency, a pass on prompts no server has seen before "
                        "the warm pass on the same prompts")
    p.add_argument("--threads", type=int, default=1, help="compute threads per server")
    p.add_argument("--server-args", default="", help="more `strictcall serve` flags")
    p.add_argument("--variant", action="append", default=[], metavar="NAME=FLAGS",
                   help="one more StrictCall system named NAME, started with `strictcall "
                        "serve FLAGS` (repeatable), e.g. "
                        "strictcall-share0='--engine llamacpp --prefill-share 0'")
    p.add_argument("--gguf", type=Path, help="the model's GGUF (default: found in the cache)")
    p.add_argument("--vllm-python", type=Path, default=ROOT / ".venv-vllm/bin/python",
                   help="a Python with vllm (default: .venv-vllm, `make setup-vllm`)")
    p.add_argument("--llamacpp-python", type=Path, default=_llamacpp_python(),
                   help="a Python with llama-cpp-python[server] (default: .venv-llamacpp "
                        "where it exists, else this Python)")
    p.add_argument("--startup-s", type=float, default=300)
    p.add_argument("--out", type=Path, default=Path("bench/results/latency"))
    add_save_flag(p, variants=True)
    return p


def _llamacpp_python() -> Path:
    own = ROOT / ".venv-llamacpp/bin/python"
    return own if own.exists() else Path(sys.executable)


def _kind(name: str) -> Kind:
    if name not in KINDS:
        raise SystemExit(f"unknown kind {name!r}; use {', '.join(KINDS)}")
    return name  # a Kind: checked just above


def _start(args: argparse.Namespace, servers: contextlib.ExitStack, scratch: Path,
           statuses: list[dict[str, Any]]) -> list[LiveSystem]:
    """Start every system asked for; record each one's status (ran, or skipped and why)."""
    import shlex

    cache = default_cache_dir()
    variants = tuple(_variant(v) for v in args.variant)
    where = Where(model_dir=embedded_model_dir(cache), gguf=args.gguf or find_gguf(cache),
                  vllm_python=args.vllm_python.absolute(),
                  llamacpp_python=args.llamacpp_python.absolute(), threads=args.threads,
                  server_args=tuple(shlex.split(args.server_args)), variants=variants,
                  slots=max(int(c) for c in args.concurrency.split(",")))
    names = list(SYSTEMS) if args.systems == "all" else [n for n in args.systems.split(",")
                                                           if n]
    names += [name for name, _ in variants if name not in names]
    if UPSTREAM in names and "vllm-server" in names:  # it fronts that server: start it first
        names.remove("vllm-server")
        names.insert(0, "vllm-server")
    live = []
    if args.url:
        live.append(LiveSystem("strictcall@url", "strictcall", False, args.url.rstrip("/")))
        statuses.append({"name": "strictcall@url", "status": "ran", "command": args.url})
    for name in names:
        launch: Launch | None = None
        try:
            launch = launch_for(name, where)
            print(f"starting {name} ...", file=sys.stderr)
            server = servers.enter_context(RunningServer(launch, startup_s=args.startup_s,
                                                         scratch=scratch))
        except Skipped as skip:
            statuses.append({"name": name, "status": "skipped", "reason": skip.reason,
                             "install": skip.install,
                             "command": launch.shown() if launch else "",
                             "settings": launch.settings if launch else {}})
            print(f"skipped {name}: {skip.reason}", file=sys.stderr)
            continue
        live.append(LiveSystem(name, launch.dialect, launch.peer, server.base_url,
                               server.memory))
        if name == "vllm-server":
            where = dataclasses.replace(where, vllm_url=server.base_url)
        statuses.append({"name": name, "status": "ran", "peer": launch.peer,
                         "command": launch.shown(), "settings": launch.settings,
                         "ready_s": server.ready_s})
    return live


async def _check_tools(live: list[LiveSystem], prompt: Prompt,
                       statuses: list[dict[str, Any]]) -> None:
    """Each peer's prompt length with and without the forced request's tools, beside its
    status (`tools_prompt`): a peer whose template renders no tools is reported, and its
    forced answers are not compared."""
    by_name = {s["name"]: s for s in statuses}
    for system in (s for s in live if s.peer):
        async with httpx.AsyncClient(base_url=system.base_url, timeout=120) as client:
            seen = await tools_seen(client, system.dialect, prompt)
        if seen and system.name in by_name:
            by_name[system.name]["tools_prompt"] = seen
            if seen.get("rendered") is False:
                print(f"{system.name}: its prompt is {seen['prompt_tokens_with_tools']} tokens "
                      "with the tools and without them: its template renders no tools",
                      file=sys.stderr)


def _variant(text: str) -> tuple[str, tuple[str, ...]]:
    import shlex

    name, sep, flags = text.partition("=")
    if not sep or not name:
        raise SystemExit(f"--variant {text!r}: give NAME=FLAGS, e.g. "
                         "strictcall-share0='--engine llamacpp --prefill-share 0'")
    return name, tuple(shlex.split(flags))


def _record_memory(live: list[LiveSystem], statuses: list[dict[str, Any]]) -> None:
    """Each server's resident memory after the run (and its peak), beside its status."""
    memory = {s.name: s.memory() for s in live if s.memory is not None}
    for status in statuses:
        status.update(memory.get(status["name"], {}))


async def measure(systems: list[LiveSystem], plan: Plan
                  ) -> tuple[list[Sample], list[Wave], dict[str, dict[str, Any]]]:
    """Run the plan's passes against every system, interleaved wave by wave; returns the
    samples, the waves' wall times and each StrictCall server's engine counters over the
    run (the deltas of /health's numbers)."""
    widest = max(plan.concurrencies + [1])
    limits = httpx.Limits(max_connections=widest, max_keepalive_connections=widest)
    clients = {s.name: httpx.AsyncClient(base_url=s.base_url, limits=limits,
                                         timeout=httpx.Timeout(900, connect=10))
               for s in systems}
    samples: list[Sample] = []
    timed_waves: list[Wave] = []
    progress = Progress(_planned(systems, plan))
    try:
        await _warm_up(systems, clients)
        before = {s.name: await engine_counters(clients[s.name]) for s in systems}
        for pass_, c, kinds, prompts in plan.passes():
            for w, wave in enumerate(plan_waves(prompts, c)):
                for kind in kinds:
                    for system in _rotated(systems, w):
                        got = await _wave(clients[system.name], system, kind, wave, c,
                                          pass_, plan.max_tokens)
                        if got is not None:
                            samples.extend(got[0])
                            timed_waves.append(got[1])
                            progress.update(len(got[0]))
        after = {s.name: await engine_counters(clients[s.name]) for s in systems}
        samples = await _with_prompt_tokens(samples, systems, clients, plan)
    finally:
        progress.close()
        for client in clients.values():
            await client.aclose()
    return samples, timed_waves, {name: counter_delta(before[name], after[name])
                                  for name in after}


def _planned(systems: list[LiveSystem], plan: Plan) -> int:
    return sum(len(wave) for _, c, kinds, prompts in plan.passes()
               for wave in plan_waves(prompts, c) for kind in kinds
               for s in systems if kind in DIALECT_KINDS[s.dialect])


def plan_waves(prompts: list[Prompt], concurrency: int) -> list[list[tuple[Prompt, int]]]:
    """The prompts in waves of `concurrency`, each with its occurrence (how many times the
    same prompt came before in this setting); too few prompts are repeated to fill a wave."""
    expanded = [prompts[i % len(prompts)] for i in range(max(len(prompts), concurrency))]
    seen: dict[str, int] = {}
    tagged = []
    for prompt in expanded:
        tagged.append((prompt, seen.get(prompt.id, 0)))
        seen[prompt.id] = seen.get(prompt.id, 0) + 1
    return [tagged[i:i + concurrency] for i in range(0, len(tagged), concurrency)]


def _rotated(systems: list[LiveSystem], wave: int) -> list[LiveSystem]:
    shift = wave % len(systems)
    return systems[shift:] + systems[:shift]


async def _wave(client: httpx.AsyncClient, system: LiveSystem, kind: Kind,
                wave: list[tuple[Prompt, int]], concurrency: int, pass_: str,
                max_tokens: int) -> tuple[list[Sample], Wave] | None:
    bodies = [request_body(p, kind, dialect=system.dialect, max_tokens=max_tokens)
              for p, _ in wave]
    if any(b is None for b in bodies):
        return None
    loop = asyncio.get_running_loop()
    start = loop.time()
    timed = await asyncio.gather(*(timed_request(client, b) for b in bodies if b))
    seconds = loop.time() - start
    samples = [Sample(system=system.name, kind=kind, concurrency=concurrency, pass_=pass_,
                      prompt_id=p.id, occurrence=occurrence,
                      outcome=check(p, kind, t.answer), e2e_s=t.e2e_s, ttft_s=t.ttft_s,
                      tpot_s=t.tpot_s, prompt_tokens=t.prompt_tokens,
                      completion_tokens=t.completion_tokens, tokens_from=t.tokens_from,
                      finish_reason=t.answer.finish_reason, error=t.answer.error,
                      text=_shown(t.answer)[:300])
               for (p, occurrence), t in zip(wave, timed, strict=False)]
    return samples, Wave(system.name, kind, concurrency, pass_, len(wave), seconds)


async def _with_prompt_tokens(samples: list[Sample], systems: list[LiveSystem],
                              clients: dict[str, httpx.AsyncClient], plan: Plan
                              ) -> list[Sample]:
    """Prompt lengths for servers that stream no usage (llama-cpp-python): each (kind,
    prompt) asked once more, not streamed, for one token, and its usage read."""
    by_id = {p.id: p for p in plan.prompts}
    dialects = {s.name: s.dialect for s in systems}
    known: dict[tuple[str, str, str], int | None] = {}
    out = []
    for sample in samples:
        key = (sample.system, sample.kind, sample.prompt_id)
        if sample.prompt_tokens is None and sample.error is None:
            if key not in known:
                known[key] = await _prompt_tokens(clients[sample.system], request_body(
                    by_id[sample.prompt_id], cast(Kind, sample.kind),  # Sample.kind: str
                    dialect=dialects[sample.system], max_tokens=1))
            sample = dataclasses.replace(sample, prompt_tokens=known[key])
        out.append(sample)
    return out


async def _prompt_tokens(client: httpx.AsyncClient, body: dict[str, Any] | None
                         ) -> int | None:
    if body is None:
        return None
    try:
        return await prompt_tokens(client, body)
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return None


def _shown(answer: Any) -> str:
    if answer.tool_calls:
        return "; ".join(f"{name}({arguments})" for name, arguments in answer.tool_calls)
    content: str = answer.content
    return content


async def _warm_up(systems: list[LiveSystem], clients: dict[str, httpx.AsyncClient]) -> None:
    """One short unconstrained request each, not measured: first-request costs (buffers,
    lazy imports) are not what this measures, grammar compiles are (no grammar here)."""
    body = {"model": MODEL, "max_tokens": 8, "temperature": 0, "stream": True,
            "messages": [{"role": "user", "content": "Say hello."}]}
    for system in systems:
        await timed_request(clients[system.name], body)


if __name__ == "__main__":
    raise SystemExit(main())
