"""tests/conftest.py's `evaldata`: a missing ../shared/evaldata file is a skip that says
what to place where, and under CI (CI=true) a failure, so CI cannot pass without it."""

from __future__ import annotations

import pytest

from tests import conftest


@pytest.fixture()
def nowhere(tmp_path, monkeypatch):
    monkeypatch.setattr(conftest, "EVALDATA", tmp_path / "evaldata")
    return tmp_path / "evaldata"


def test_a_missing_file_is_a_skip_that_says_what_to_place_where(nowhere, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        conftest.evaldata("bfcl/BFCL_v4_multiple.json")
    reason = str(skipped.value)
    assert str(nowhere / "bfcl" / "BFCL_v4_multiple.json") in reason
    assert "ShishirPatil/gorilla" in reason and f"at {nowhere}" in reason


@pytest.mark.parametrize("value", ["true", "1", "TRUE"])
def test_under_ci_a_missing_file_fails_the_run(nowhere, monkeypatch, value):
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception, match="CI=true: a missing data file fails"):
        conftest.evaldata("json-schema-test-suite/draft2020-12")
    with pytest.raises(pytest.fail.Exception):
        conftest.bfcl("BFCL_v4_simple_python.json")


def test_a_present_file_is_its_path(nowhere, monkeypatch):
    monkeypatch.setenv("CI", "true")
    (nowhere / "bfcl").mkdir(parents=True)
    (nowhere / "bfcl" / "q.json").write_text('{"id": "a"}\n{"id": "b"}\n')
    assert conftest.evaldata("bfcl/q.json") == nowhere / "bfcl" / "q.json"
    assert [q["id"] for q in conftest.bfcl("q.json")] == ["a", "b"]
