"""`strictcall-bench gpu-decode --tiny`: the GPU script's whole path on the CPU, with a
2-layer random-weight Llama and the embedded model's tokenizer."""

from __future__ import annotations

import json

import pytest

from bench.speed import gpu_decode
from server.model_store import embedded_model_dir
from tests.tiers import cannot_run


@pytest.mark.slow
def test_tiny_run_on_the_cpu_reports_every_setting(tmp_path, capsys):
    if not (embedded_model_dir() / "tokenizer.json").is_file():
        cannot_run("the embedded model is not fetched (strictcall fetch-model)")
    assert gpu_decode.main(["--tiny", "--rounds", "1", "--tokens", "16", "--batches", "1,4",
                            "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "gpu_decode.json").read_text())
    assert result["device"] == "cpu"
    measured = [r for r in result["rows"] if "note" not in r]
    assert {(r["batch"], r["mode"].split(",")[0]) for r in measured} == {
        (b, m) for b in (1, 4) for m in ("unconstrained", "constrained")}
    for row in measured:
        assert row["requests"] == row["batch"] and 1 <= row["tokens_max"] <= 16
        assert row["tpot_ms_p50"] > 0 and row["batch_tokens_per_s"] > 0
        if row["mode"].startswith("constrained"):  # mask time beside the step it is part of
            assert row["mask_ms_per_step"] > 0 and row["mask_share_of_step"] > 0
    assert "| tiny | 4 | constrained" in (tmp_path / "gpu_decode.md").read_text()
    assert "ms/token p50" in capsys.readouterr().out
