"""The memory bench: each system alone, its RSS read after start-up, after one json question
and after the rest, as a ratio over llama.cpp's C++ llama-server at the same points."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

from bench.speed.latency_systems import PEER_CONTEXT
from bench.speed.memory import CONFIGS, run, table_of


def test_strictcall_runs_at_the_peers_context_but_in_its_default():
    for name, flags in CONFIGS.items():
        given = "--max-model-len" in flags
        assert given == (name != "default")
        if given:
            assert flags[flags.index("--max-model-len") + 1] == str(PEER_CONTEXT)
    assert CONFIGS["one-row"][CONFIGS["one-row"].index("--max-batch") + 1] == "1"


def test_a_skipped_system_is_a_row_that_says_why():
    header, body = table_of([{"name": "strictcall-one-row", "skipped": "no GGUF"}])
    assert len(body[0]) == len(header) and body[0][1] == "skipped: no GGUF"


@pytest.mark.slow
def test_a_real_run_beside_llamacpps_server():
    """For real: llama-server, llama-cpp-python's server and `strictcall serve --max-batch 1`
    one after the other on the embedded model's GGUF, two json questions each; the ratio is
    over llama-server's RSS (a peer not built or installed is reported skipped)."""
    args = argparse.Namespace(requests=1, gguf=None, startup_s=300.0,
                              llamacpp_python=Path(sys.executable))
    rows = {r["name"]: r for r in run(["one-row"], args)}
    ours = rows["strictcall-one-row"]
    assert ours["last_mib"] >= ours["first_mib"] >= ours["ready_mib"] > 100
    assert ours["sized_mib"]["kv_rows"] == pytest.approx(PEER_CONTEXT * 22.5 / 1024)
    assert "llamacpp-server" in rows
    peer = rows["llama-server"]
    if "skipped" not in peer:
        assert ours["ready_s_ratio"] == round(ours["ready_s"] / peer["ready_s"], 2)
        assert ours["first_ratio"] == round(ours["first_mib"] / peer["first_mib"], 2)
        assert peer["first_mib"] > 50
