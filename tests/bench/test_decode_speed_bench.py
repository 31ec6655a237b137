"""`bench.speed.decode_speed` without its BFCL file: it refuses, saying what to place where, unless
--no-bfcl asks for the story schema (and then its output says so)."""

from __future__ import annotations

import pytest

import bench.speed.decode_speed as decode_speed


def test_a_missing_bfcl_file_is_refused_naming_it_and_the_way_out(tmp_path, monkeypatch):
    missing = tmp_path / "shared/evaldata/bfcl/BFCL_v4_simple_python.json"
    monkeypatch.setattr(decode_speed, "BFCL", missing)
    with pytest.raises(SystemExit) as refused:
        decode_speed.main(["--rounds", "1"])
    message = str(refused.value)
    assert str(missing) in message and "--no-bfcl" in message
    assert str(tmp_path / "shared/evaldata") in message
