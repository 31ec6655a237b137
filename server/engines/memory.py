"""Where an engine's resident memory goes: what it sized from its settings (KV cells for
the batch's rows and for parked prompt prefixes, the logits buffer) beside what the process
holds (RSS, its peak), and whether torch is loaded. Logged at start-up and shown in
/health ("memory"), so the cost of each extra batch row and of the prefix cache is seen,
not guessed (README, "Memory")."""

from __future__ import annotations

import sys
from pathlib import Path

MIB = 2**20


def process_memory() -> dict[str, int]:
    """This process's resident memory now and at its peak, in bytes (Linux /proc; {} where
    it cannot be read), and whether torch is imported (about 200 MiB of it)."""
    out = {"torch_loaded": int(sys.modules.get("torch") is not None)}
    try:
        lines = Path("/proc/self/status").read_text().splitlines()
    except OSError:
        return out
    fields = dict(line.split(":", 1) for line in lines if ":" in line)
    for key, name in (("VmRSS", "rss_bytes"), ("VmHWM", "peak_rss_bytes")):
        if key in fields:
            out[name] = int(fields[key].split()[0]) * 1024
    return out


def describe(sizes: dict[str, int]) -> str:
    """One log line: each `*_bytes` size in MiB, other values as they are."""
    parts = []
    for key, value in sizes.items():
        if key.endswith("_bytes"):
            parts.append(f"{key[:-len('_bytes')]} {value / MIB:.0f} MiB")
        else:
            parts.append(f"{key} {value}")
    return ", ".join(parts)
