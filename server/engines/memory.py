"""Where an engine's resident memory goes: what it sized from its settings (KV cells for
the batch's rows and for parked prompt prefixes, the logits buffer) beside what the process
holds (RSS, its peak), and whether torch is loaded. Logged at start-up and shown in
/health ("memory"), so the cost of each extra batch row and of the prefix cache is seen,
not guessed (README, "Memory")."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import os
import sys
from pathlib import Path
from typing import Any

MIB = 2**20
# glibc's mallopt() parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
# Blocks this large or larger are mapped on their own and unmapped when freed.
FIXED_THRESHOLD = 128 * 1024


@functools.cache
def _glibc() -> Any:
    """The C library's handle where it is glibc (the one with mallopt and malloc_trim)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "malloc_trim") else None


def fix_malloc_thresholds() -> bool:
    """Keep glibc's mmap and trim thresholds at 128 KiB. By default glibc raises its mmap
    threshold each time a mapped block is freed (up to 32 MiB), so the large transient
    blocks of start-up (tokenizer JSON, grammar compiles, the vocabulary's copies) come from
    the heap and stay resident once freed: 18 MiB of this server's RSS after one answer
    (`strictcall-bench memory`). Called first thing in `strictcall serve`; the MALLOC_*_
    environment variables, where set, win."""
    libc = _glibc()
    if libc is None or "MALLOC_MMAP_THRESHOLD_" in os.environ \
            or "MALLOC_TRIM_THRESHOLD_" in os.environ:
        return False
    return bool(libc.mallopt(_M_MMAP_THRESHOLD, FIXED_THRESHOLD)) and \
        bool(libc.mallopt(_M_TRIM_THRESHOLD, FIXED_THRESHOLD))


def release_free_heap() -> None:
    """Give the heap's free pages back to the system (glibc's malloc_trim), after start-up's
    transient allocations; a no-op elsewhere."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


def freeze_startup_heap() -> None:
    """Collect once, then set what start-up left alive (modules, the tokenizer's tables, the
    engine's wrappers: about 300,000 objects with the embedded model) out of the cyclic
    collector's reach (`gc.freeze`, as vLLM's engine does after start-up). A full
    collection then walks only what came after: measured in a run of schema checks, the
    longest pause 233 ms before and 103 ms after, each one holding every request and the
    decode loop. Undone at shutdown (`gc.unfreeze`), so a process that starts the app again
    (the tests) can still collect the first app's cycles."""
    gc.collect()
    gc.freeze()


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
