"""`strictcall eval` against the real server: two configurations on the shipped scenarios,
and the baseline gate's exit status, including a degraded run the gate must fail."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from server.process import ROOT
from tests.live import MODEL

pytestmark = pytest.mark.slow
FILES = [str(ROOT / "contracts" / "scenarios" / "check_access_request_status.yaml")]


def _eval(live_server: str, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "server.cli", "eval", *FILES,
                           "--url", f"{live_server}/v1", "--model", MODEL, "--out", str(out),
                           *extra], cwd=ROOT, capture_output=True, text=True, timeout=900)


def test_eval_runs_and_gates(live_server, tmp_path):
    first = _eval(live_server, tmp_path / "a.json")
    assert first.returncode == 0, first.stderr
    run = json.loads((tmp_path / "a.json").read_text())
    assert run["params"]["model"] == MODEL
    assert set(run["schema_versions"]) == {"check_access_request_status"}
    assert all(v != "unknown" for v in run["schema_versions"].values())
    assert len(run["results"]) == sum(len(v) for v in run["scenario_files"].values())
    assert "| check_access_request_status |" in first.stdout
    # User text is never written: only its hash.
    assert "AR-004217" not in (tmp_path / "a.json").read_text()
    # A baseline better than anything possible: the gate fails with exit status 1.
    perfect = dict(run, summary={**run["summary"], "classes": {
        c: {**s, "correct_call_rate": 1.0} for c, s in run["summary"]["classes"].items()}})
    (tmp_path / "perfect.json").write_text(json.dumps(perfect))
    gated = _eval(live_server, tmp_path / "b.json", "--baseline", str(tmp_path / "perfect.json"),
                  "--threshold-read", "0", "--threshold-write", "0")
    below = [c for c, s in run["summary"]["classes"].items() if s["correct_call_rate"] < 1]
    assert gated.returncode == (1 if below else 0), gated.stdout
    # A run that must fail: one token per answer cuts off every call (only scenarios that
    # expect no call can still score), against the first run as the baseline, no drop
    # allowed. The first run must have called something right, or nothing could drop.
    rates = {c: s["correct_call_rate"] for c, s in run["summary"]["classes"].items()}
    degraded = _eval(live_server, tmp_path / "c.json", "--max-tokens", "1",
                     "--baseline", str(tmp_path / "a.json"),
                     "--threshold-read", "0", "--threshold-write", "0")
    cut = {c: s["correct_call_rate"] for c, s in
           json.loads((tmp_path / "c.json").read_text())["summary"]["classes"].items()}
    assert any(cut[c] < rates[c] for c in rates), (rates, cut)
    assert degraded.returncode == 1, degraded.stdout + degraded.stderr
    assert "REGRESSION: read tools: correct-call rate" in degraded.stdout, degraded.stdout
