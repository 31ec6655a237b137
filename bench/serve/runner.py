"""Drives the load: a warm-up, then each setting against every target, every request timed
and its answer judged, the targets' /metrics scraped before and after.

Interleaving (`--interleave`):
- requests (default): in each setting every target is loaded at once, each at the
  setting's rate or concurrency, their requests interleaved in time; drift (a neighbour's
  job, thermal throttling, a cache filling) then hits all targets alike. For targets on
  their own hardware.
- settings: one target at a time, the first target changing from setting to setting, for
  targets that share hardware (StrictCall in front of the vLLM you also measure directly):
  loading both at once would give the shared server twice the load.
Every target gets the same requests in the same order (item i of the workload, cycled).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from bench.common.progress import Progress
from bench.serve import metrics
from bench.serve.client import send
from bench.serve.record import Record
from bench.serve.schedule import Arrivals, Setting, interleaved, rotated
from bench.serve.targets import Target
from bench.serve.validity import judge
from bench.serve.workload import WorkItem

Interleave = Literal["requests", "settings"]


@dataclass(frozen=True)
class LoadPlan:
    settings: list[Setting]
    count: int | None = None  # requests per target and setting
    duration_s: float | None = None  # seconds per setting (whichever ends first)
    arrivals: Arrivals = "poisson"
    warmup: int = 1  # requests per target before the first setting, not reported
    interleave: Interleave = "requests"
    seed: int = 0
    max_tokens: int | None = None  # None: each body's own
    extra_body: dict[str, Any] = field(default_factory=dict)
    timeout_s: float = 600

    def planned(self, targets: int) -> int | None:
        """Requests the run will send, where a count bounds it."""
        if self.count is None:
            return None
        return targets * (self.warmup + self.count * len(self.settings))


@dataclass
class Outcome:
    records: list[Record]
    metrics_before: dict[str, dict[str, float] | None]
    metrics_after: dict[str, dict[str, float] | None]


class _Run:
    def __init__(self, targets: list[Target], items: list[WorkItem], plan: LoadPlan,
                 clients: dict[str, httpx.AsyncClient], progress: Progress) -> None:
        self.targets = {t.name: t for t in targets}
        self.items, self.plan, self.clients, self.progress = items, plan, clients, progress
        self.t0 = time.perf_counter()
        self.records: list[Record] = []

    async def one(self, target: Target, setting: str, phase: str, seq: int,
                  scheduled_s: float | None = None) -> None:
        item = self.items[seq % len(self.items)]
        body = item.request(model=target.model, dialect=target.dialect,
                            max_tokens=self.plan.max_tokens, extra=self.plan.extra_body)
        m = await send(self.clients[target.name], item.api, body, dict(item.headers))
        shown = m.answer.content or "; ".join(f"{n}({a})" for n, a in m.answer.tool_calls)
        self.records.append(Record(
            target=target.name, setting=setting, phase=phase, workload=item.workload,
            item=item.id, api=item.api, seq=seq, start_s=m.sent_at - self.t0, e2e_s=m.e2e_s,
            scheduled_s=scheduled_s, ttft_s=m.ttft_s, itl_s=m.itl_s,
            prompt_tokens=m.prompt_tokens, completion_tokens=m.completion_tokens,
            tokens_from=m.tokens_from, finish_reason=m.answer.finish_reason,
            outcome=judge(item.expect, m.answer), status=m.status, error=m.answer.error,
            text=shown[:200]))
        self.progress.update(1)

    async def warm_up(self) -> None:
        """Sequential, not reported: first-request costs (a connection, lazy imports, the
        first grammar compiles) are not what the settings measure."""
        for target in self.targets.values():
            for seq in range(self.plan.warmup):
                await self.one(target, "warm-up", "warmup", seq)

    async def setting(self, setting: Setting, names: list[str]) -> None:
        if setting.mode == "rate":
            await self._open_loop(setting, names)
        else:
            await asyncio.gather(*(self._closed_loop(setting, self.targets[n])
                                   for n in names))

    async def _open_loop(self, setting: Setting, names: list[str]) -> None:
        plan = self.plan
        schedule = interleaved(names, setting.value, kind=plan.arrivals, seed=plan.seed,
                               count=plan.count, duration_s=plan.duration_s)
        start = time.perf_counter()
        tasks = []
        for at, name, seq in schedule:
            delay = start + at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(self.one(
                self.targets[name], setting.label, "measure", seq,
                scheduled_s=start + at - self.t0)))
        await asyncio.gather(*tasks)

    async def _closed_loop(self, setting: Setting, target: Target) -> None:
        plan = self.plan
        deadline = None if plan.duration_s is None else time.perf_counter() + plan.duration_s
        next_seq = iter(range(plan.count)) if plan.count is not None else itertools.count()

        async def client() -> None:
            for seq in next_seq:  # shared: each number goes to one client
                if deadline is not None and time.perf_counter() >= deadline:
                    return
                await self.one(target, setting.label, "measure", seq)

        await asyncio.gather(*(client() for _ in range(int(setting.value))))


async def run(targets: list[Target], items: list[WorkItem], plan: LoadPlan, *,
              transport: httpx.AsyncBaseTransport | None = None) -> Outcome:
    """`transport`: where requests go instead of the network (the tests' scripted server)."""
    widest = max([int(s.value) for s in plan.settings if s.mode == "concurrency"] + [8])
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=widest)
    timeout = httpx.Timeout(plan.timeout_s, connect=10)
    async with contextlib.AsyncExitStack() as stack:
        clients = {t.name: await stack.enter_async_context(httpx.AsyncClient(
            base_url=t.root, headers=t.headers(), limits=limits, timeout=timeout,
            transport=transport))
            for t in targets}
        progress = Progress(plan.planned(len(targets)))
        try:
            state = _Run(targets, items, plan, clients, progress)
            await state.warm_up()
            before = {t.name: await scrape(clients[t.name]) for t in targets}
            names = [t.name for t in targets]
            for i, setting in enumerate(plan.settings):
                if plan.interleave == "requests":
                    await state.setting(setting, names)
                else:
                    for name in rotated(names, i):
                        await state.setting(setting, [name])
            after = {t.name: await scrape(clients[t.name]) for t in targets}
        finally:
            progress.close()
    return Outcome(state.records, before, after)


async def scrape(client: httpx.AsyncClient) -> dict[str, float] | None:
    """The target's /metrics series of vLLM's and StrictCall's names; None where it has
    no /metrics (llama.cpp's server) or answers with something else."""
    try:
        resp = await client.get("/metrics", timeout=10)
    except httpx.HTTPError:
        return None
    if resp.status_code != 200 or "json" in resp.headers.get("content-type", ""):
        return None
    return metrics.parse(resp.text)
