"""The raw per-request record `strictcall-bench serve` writes (one JSON object a line of
records.jsonl): every number of the report can be computed again from these."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Record:
    target: str
    setting: str  # Setting.label: "rate 2/s", "concurrency 4"
    phase: str  # "warmup" (not in the report) or "measure"
    workload: str
    item: str  # the work item's id in its workload
    api: str
    seq: int  # the how-manyth request of this target in this setting (0 first)
    start_s: float  # when it was sent, seconds since the run began
    e2e_s: float  # sent to the end of its stream (or its error)
    scheduled_s: float | None = None  # open loop: when it was due (start_s - this: lag)
    ttft_s: float | None = None
    itl_s: tuple[float, ...] = ()  # gaps between output events after the first
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    tokens_from: str = "usage"  # or "chunks" (the server sent no usage)
    finish_reason: str | None = None
    outcome: str = "error"  # bench/serve/validity.py's outcomes
    status: int | None = None  # HTTP status; None: no response at all
    error: str | None = None
    text: str = ""  # the answer's start, to see what came back

    @property
    def end_s(self) -> float:
        return self.start_s + self.e2e_s

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first: (e2e - TTFT) / (tokens - 1)."""
        if self.ttft_s is None or not self.completion_tokens or self.completion_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.completion_tokens - 1)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["itl_s"] = list(self.itl_s)
        return out


def write_records(records: list[Record], path: Path) -> None:
    with path.open("w") as f:
        for record in records:
            f.write(json.dumps(record.as_dict(), ensure_ascii=False) + "\n")


def read_records(path: Path) -> list[Record]:
    known = {f.name for f in fields(Record)}
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            raw = {k: v for k, v in json.loads(line).items() if k in known}
            raw["itl_s"] = tuple(raw.get("itl_s") or ())
            out.append(Record(**raw))
    return out
