"""`strictcall-bench tool-selection` without a model: the catalog, the recall table."""

from __future__ import annotations

import json

from tests.conftest import evaldata


def test_selection_recall_table(tmp_path, capsys):
    from bench.accuracy.tool_selection import main

    evaldata("bfcl/BFCL_v4_multiple.json")  # skips without the shared data (fails in CI)
    evaldata("bfcl/multi_turn/BFCL_v4_multi_turn_base.json")
    out = tmp_path / "sel.json"
    assert main(["--ks", "3,5", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["questions"] == 200 and report["catalog"] > 200
    served = report["rows"][0]
    assert served["recall@3"] <= served["recall@5"] <= 1.0
    assert "first 20" in report["rows"][-1]["method"]
    assert "| k=3 | k=5 |" in capsys.readouterr().out
    # In a dialogue: the newest message's weight, 0 (the dialogue's words alone) first.
    alone, *_, served = report["multi_turn"]
    assert alone["newest_weight"] == 0 and served["newest_weight"] > 0
    assert alone["turns"] == served["turns"] > 500
    assert served["functions@5"] >= alone["functions@5"]  # (measured: 826 against 701)
