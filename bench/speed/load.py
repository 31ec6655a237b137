"""Load: N concurrent clients over real HTTP for M minutes against one real server process
(the embedded model), on a mix of forced tool calls (tool_choice "required"), JSON answers
(response_format json_schema) and streamed answers, some clients leaving mid-stream (or
before a non-streamed answer) at random. Each request carries its own X-Request-Id; a shed
client waits what Retry-After says (with jitter) before its next request.

    strictcall-bench load [--clients 8] [--minutes 2] [--runs 1] [--leave 0.2]
                          [--out bench/results/scratch/load.json] [--server-args "--max-queued 4"]

Per run: requests sent, answered (2xx, whole answer), shed (429/503 with Retry-After),
disconnected by the client, refused (other 4xx), lost (no answer at all: goal 0),
duplicated (an answer whose request id is not the one sent, or an id answered twice: goal
0), 5xx other than shed (goal 0), p50/p99 latency of answers, the server's RSS before and
after, and whether the engine was idle (every decode slot freed) once the clients stopped.
Several runs on one server show whether memory grows from run to run. Categories:
bench/speed/load_tally.py.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import shlex
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from bench.common.results_file import add_save_flag, save
from bench.speed.load_tally import Outcome, Tally, table
from server.process import ServerProcess

MODEL = "m"
TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 40},
        "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city", "unit"]}}}
ANSWER = {"type": "object", "properties": {
    "answer": {"type": "string", "maxLength": 60},
    "confidence": {"type": "integer", "minimum": 0, "maximum": 100}},
    "required": ["answer", "confidence"]}
CITIES = ("Paris", "Lagos", "Osaka", "Lima", "Oslo", "Quito", "Perth", "Austin")
TOPICS = ("the moon", "rivers", "bees", "glass", "volcanoes", "tea", "maps", "salt")
KINDS = ("tool", "json", "stream")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="strictcall-bench load", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--minutes", type=float, default=2.0)
    p.add_argument("--runs", type=int, default=1, help="runs on the same server, in a row")
    p.add_argument("--leave", type=float, default=0.2,
                   help="share of requests whose client leaves before the end")
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--server-args", default="", help="more `strictcall serve` flags")
    p.add_argument("--out", type=Path, default=Path("bench/results/scratch/load.json"))
    add_save_flag(p)
    args = p.parse_args(argv)
    rows = run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2))
    if args.save:
        save("load", rows, argv)
    print(json.dumps(rows, indent=2))
    print(table(rows))
    bad = sum(r["lost"] + r["duplicated"] + r["server_error"] for r in rows)
    return 1 if bad else 0


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    with ServerProcess("--served-model-name", MODEL, *shlex.split(args.server_args)) as server:
        rss_boot = rss_kib(server.pid)
        asyncio.run(_warm_up(server.base_url, args))
        for i in range(args.runs):
            rng = random.Random(args.seed + i)
            start_rss = rss_kib(server.pid)
            started = time.monotonic()
            tally = asyncio.run(_load(server.base_url, args, rng, run_no=i + 1))
            seconds = time.monotonic() - started
            idle = asyncio.run(_idle(server.base_url))
            rows.append({"run": i + 1, "clients": args.clients, "seconds": seconds,
                         **tally.summary(), "rss_boot_kib": rss_boot,
                         "rss_start_kib": start_rss, "rss_end_kib": rss_kib(server.pid),
                         "idle_after": idle})
            print(table(rows[-1:]).splitlines()[-1], file=sys.stderr)
    return rows


def rss_kib(pid: int) -> int | None:
    """The process's resident memory (VmRSS) in KiB; None where /proc has no such line."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


async def _warm_up(base_url: str, args: argparse.Namespace) -> None:
    """One request of each kind first: grammar compiles are not what this measures."""
    async with httpx.AsyncClient(base_url=base_url, timeout=300) as client:
        rng = random.Random(-1)
        for kind in KINDS:
            await _request(client, kind, rng, args, leave=False, request_id=f"warm-{kind}")


async def _load(base_url: str, args: argparse.Namespace, rng: random.Random, *,
                run_no: int) -> Tally:
    tally = Tally()
    deadline = time.monotonic() + args.minutes * 60
    limits = httpx.Limits(max_connections=args.clients, max_keepalive_connections=args.clients)
    async with httpx.AsyncClient(base_url=base_url, timeout=httpx.Timeout(300, connect=10),
                                 limits=limits) as client:
        async def one_client(c: int) -> None:
            own = random.Random(rng.random())
            n = 0
            while time.monotonic() < deadline:
                n += 1
                kind = own.choice(KINDS)
                leave = own.random() < args.leave
                request_id = f"load-{run_no}-{c}-{n}-{uuid.uuid4().hex[:8]}"
                outcome = await _request(client, kind, own, args, leave=leave,
                                         request_id=request_id)
                if tally.add(outcome) == "shed":  # as a polite client: wait, with jitter
                    await asyncio.sleep(min(outcome.retry_after_s, 10) * own.uniform(0.5, 1))

        await asyncio.gather(*(one_client(c) for c in range(args.clients)))
    return tally


async def _request(client: httpx.AsyncClient, kind: str, rng: random.Random,
                   args: argparse.Namespace, *, leave: bool, request_id: str) -> Outcome:
    body = _body(kind, rng, args.max_tokens)
    out = Outcome(kind=kind, sent_id=request_id)
    start = time.monotonic()
    try:
        if kind == "stream":
            await _stream(client, body, out, leave_after=rng.randint(1, 6) if leave else None)
        elif leave:  # gone before the answer: cancelled mid-wait, the connection closed
            try:
                await asyncio.wait_for(_plain(client, body, out), rng.uniform(0.2, 2.0))
            except TimeoutError:
                out.disconnected = True
        else:
            await _plain(client, body, out)
    except httpx.HTTPError as exc:
        out.error = f"{type(exc).__name__}: {exc}"
    out.seconds = time.monotonic() - start
    return out


async def _plain(client: httpx.AsyncClient, body: dict[str, Any], out: Outcome) -> None:
    resp = await client.post("/v1/chat/completions", json=body,
                             headers={"X-Request-Id": out.sent_id})
    _head(resp, out)
    try:
        parsed = resp.json()
    except ValueError:
        out.error = f"{resp.status_code} body is not JSON: {resp.text[:200]}"
        return
    out.complete = True
    if resp.status_code < 300:
        out.completion_id = parsed.get("id")
    else:
        out.problem = str(parsed.get("type", "")).rpartition("#")[2]
        out.error = f"{resp.status_code} {parsed.get('detail', resp.text[:200])}"


async def _stream(client: httpx.AsyncClient, body: dict[str, Any], out: Outcome, *,
                  leave_after: int | None) -> None:
    async with client.stream("POST", "/v1/chat/completions", json=body,
                             headers={"X-Request-Id": out.sent_id}) as resp:
        _head(resp, out)
        if resp.status_code >= 300:
            await resp.aread()
            with contextlib.suppress(ValueError):
                out.problem = str(resp.json().get("type", "")).rpartition("#")[2]
            out.complete, out.error = True, f"{resp.status_code} {resp.text[:200]}"
            return
        chunks = 0
        async for line in resp.aiter_lines():
            if not line.startswith("data: "):
                continue
            data = line.removeprefix("data: ")
            if data == "[DONE]":
                out.complete = True
                return
            event = json.loads(data)
            if "choices" not in event:  # the final error event of a stream that had begun
                out.stream_error_status = int(event.get("status") or 500)
                out.problem = str(event.get("type", "")).rpartition("#")[2]
                out.error = f"stream error event: {data[:200]}"
                continue
            out.completion_id = out.completion_id or event.get("id")
            chunks += 1
            if leave_after is not None and chunks >= leave_after:
                out.disconnected = True
                return  # leaving the block closes the connection mid-stream
        out.error = "the stream ended without data: [DONE]"


def _head(resp: httpx.Response, out: Outcome) -> None:
    out.status = resp.status_code
    out.retry_after = "retry-after" in resp.headers
    try:
        out.retry_after_s = float(resp.headers.get("retry-after", 0))
    except ValueError:  # an HTTP date: not what this server sends
        out.retry_after_s = 1.0
    out.echoed_id = resp.headers.get("x-request-id")


def _body(kind: str, rng: random.Random, max_tokens: int) -> dict[str, Any]:
    body: dict[str, Any] = {"model": MODEL, "max_tokens": max_tokens,
                            "temperature": rng.choice([0, 0.7]), "seed": rng.randrange(10**6)}
    if kind == "tool":
        city = rng.choice(CITIES)
        body.update(messages=[{"role": "user", "content": f"What is the weather in {city}?"}],
                    tools=[TOOL], tool_choice="required")
    elif kind == "json":
        topic = rng.choice(TOPICS)
        body.update(messages=[{"role": "user", "content": f"One short fact about {topic}."}],
                    response_format={"type": "json_schema", "json_schema": {
                        "name": "fact", "schema": ANSWER, "strict": True}})
    else:
        topic = rng.choice(TOPICS)
        body.update(messages=[{"role": "user", "content": f"Tell me about {topic}."}],
                    stream=True, stream_options={"include_usage": True})
        if rng.random() < 0.5:  # a streamed tool call
            body.update(tools=[TOOL], tool_choice="required",
                        messages=[{"role": "user", "content":
                                   f"Weather in {rng.choice(CITIES)}, please."}])
    return body


async def _idle(base_url: str, wait_s: float = 60) -> bool:
    """Whether the engine has no request running or queued once the clients are done:
    every decode slot a leaving client held was freed."""
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as client:
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            engine = (await client.get("/health")).json().get("engine", {})
            if engine.get("running", 0) == 0 and engine.get("queued", 0) == 0:
                return True
            await asyncio.sleep(0.5)
    return False


if __name__ == "__main__":
    raise SystemExit(main())
