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


def test_the_headline_ratio_is_per_step_one_token_a_step_and_the_served_one_stands_beside():
    # Jump-forward feeds forced tokens several a step: a served step costs more and an
    # answer needs fewer. The headline compares steps of one token on both sides.
    import argparse

    rounds = [{"tokens": 18, "forced": 6, "free_steps_s": 18.0, "stepwise_steps_s": 17.1,
               "served_steps_s": 16.2, "free_tok_s": 18.0, "served_tok_s": 24.0},
              {"tokens": 18, "forced": 6, "free_steps_s": 20.0, "stepwise_steps_s": 20.0,
               "served_steps_s": 18.0, "free_tok_s": 20.0, "served_tok_s": 26.0}]
    masks = {"mask_ms_per_token_median": 0.03}
    args = argparse.Namespace(rounds=2, tokens=64, threads=1)
    out = decode_speed._result(rounds, {}, masks, args)
    assert out["ratio_constrained_over_unconstrained"] == out["per_step"]["median_ratio"] == (
        round((17.1 / 18 + 1.0) / 2, 3))
    assert out["per_step"]["ratio_of_medians"] == round(18.55 / 19.0, 3)
    assert out["served_per_step"]["median_ratio"] == 0.9
    assert out["served_per_output_token"]["median_ratio"] == round((24 / 18 + 26 / 20) / 2, 3)
    assert out["pairs"] == 2 and out["forced_tokens_median"] == 6
