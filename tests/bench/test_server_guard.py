"""bench/common/server_guard.py: a benchmark's server past its memory bound is killed, the death
recorded with why and during what, and a new server takes its place."""

from __future__ import annotations

import os
import time

import pytest

from bench.common.server_guard import GuardedServer


@pytest.mark.slow
def test_a_server_past_its_memory_bound_is_killed_recorded_and_replaced():
    # 0.2 GiB: below what the embedded model's server holds once started
    with GuardedServer("--served-model-name", "m", max_rss_gib=0.2) as server:
        first = server.pid
        server.during = "dialogue 7 grounding-on"
        deadline = time.monotonic() + 10
        while server.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        (death,) = server.deaths
        assert death["during"] == "dialogue 7 grounding-on" and death["exit"] == -9
        assert "passed the 0.2 GiB bound: killed" in death["why"]
        assert server.pid != first  # a new server; the killed one is gone (reaped)
        with pytest.raises(ProcessLookupError):
            os.kill(first, 0)
