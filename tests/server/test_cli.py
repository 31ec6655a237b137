"""Configuration errors end the CLI with one readable line (exit 2), not a traceback."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from server.process import ROOT


def serve_command(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "server.cli", "serve", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed")
def test_vllm_engine_without_vllm_is_one_line():
    done = serve_command("--engine", "vllm")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "vLLM is not installed" in line and "make setup-vllm" in line


@pytest.mark.parametrize(("args", "says"), [
    (("--model", "/nonexistent/model"), "/nonexistent/model"),
    (("--engine", "tensorrt"), "invalid choice"),
    (("--max-model-len", "4"), "max_model_len"),
    (("--engine", "vllm", "--grammar-backend", "llguidance"),
     "--grammar-backend llguidance is for the torch engine"),
    (("--json-layout", "spaced", "--grammar-backend", "outlines"),
     "--json-layout spaced needs an embedded engine with the xgrammar or llguidance"),
    (("--json-layout", "tabs"), "invalid choice"),
])
def test_bad_configuration_is_one_line(args, says):
    done = serve_command(*args)
    assert done.returncode == 2
    assert says in done.stderr
    assert "Traceback" not in done.stderr


def test_cuda_device_without_a_gpu_is_one_line():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this host has a GPU")
    done = serve_command("--device", "cuda")
    assert done.returncode == 2 and "no CUDA GPU" in done.stderr
    assert "Traceback" not in done.stderr


def _model_copy(model_dir, target, weights: bytes | None):
    """The model directory's small files in `target`, and `weights` as its safetensors."""
    target.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        (target / name).write_bytes((model_dir / name).read_bytes())
    if weights is not None:
        (target / "model.safetensors").write_bytes(weights)
    return target


def _head(model_dir, n: int) -> bytes:
    with (model_dir / "model.safetensors").open("rb") as f:
        return f.read(n)


@pytest.mark.parametrize(("weights", "says"), [
    (lambda d: None, "has no model weights"),
    (lambda d: _head(d, 1 << 20), "truncated"),                # a download cut short
    (lambda d: _head(d, 4), "shorter than a safetensors header"),
    (lambda d: b"\x10\x00\x00\x00\x00\x00\x00\x00not json at all!", "not JSON"),
], ids=["no-weights", "truncated", "stub", "garbage-header"])
def test_missing_or_corrupt_weights_are_one_line(model_dir, tmp_path, weights, says):
    target = _model_copy(model_dir, tmp_path / "model", weights(model_dir))
    done = serve_command("--model", str(target))
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("strictcall: ") and says in line and str(target) in line
    assert "Traceback" not in done.stderr


TORCH_CONTRACT = '''
import torch
from pydantic import BaseModel
from contracts.contract import tool


@tool(name="scale", description="Scale a number.", owner="t", kind="read", risk="low")
class Scale(BaseModel):
    value: float
'''


def test_contracts_that_import_torch_say_how_to_let_torch_in(tmp_path):
    """A llama.cpp server keeps torch out of its process (engines/factory.py
    keep_torch_out): contracts that import torch end it with one line naming the flag
    that lets torch in, and with that flag the server serves them, torch loaded."""
    import httpx

    from server.process import ServerProcess

    contracts = tmp_path / "torch_contracts.py"
    contracts.write_text(TORCH_CONTRACT)
    done = serve_command("--engine", "llamacpp", "--contracts", str(contracts))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "torch" in line and "--no-torch-free" in line
    with ServerProcess("--engine", "llamacpp", "--contracts", str(contracts),
                       "--no-torch-free") as server:
        health = httpx.get(f"{server.base_url}/health").json()
    assert health["memory"]["torch_loaded"] == 1


def test_a_today_that_is_no_date_is_one_line():
    import os

    done = subprocess.run([sys.executable, "-m", "server.cli", "serve"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "STRICTCALL_TODAY": "yesterday"})
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "STRICTCALL_TODAY='yesterday' is not a date" in line and "YYYY-MM-DD" in line


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "::"])
def test_listening_beyond_localhost_without_keys_is_refused_unless_said(host):
    from server.cli import _open_beyond_localhost
    from server.settings import Settings

    assert _open_beyond_localhost(Settings(host=host))
    assert not _open_beyond_localhost(Settings(host=host, open_without_keys=True))
    assert not _open_beyond_localhost(Settings(host="127.0.0.1"))
    assert not _open_beyond_localhost(Settings(host="::1"))


def test_contracts_check_names_what_changed_since_the_snapshots(tmp_path, capsys):
    import json

    from server.cli import main

    assert main(["contracts", "snapshot", "--out", str(tmp_path)]) == 0
    assert main(["contracts", "check", "--out", str(tmp_path)]) == 0
    path = tmp_path / "open_dispute.json"
    snap = json.loads(path.read_text())
    snap["parameters"]["properties"]["amount"]["pattern"] = "^[0-9]+$"
    path.write_text(json.dumps(snap))
    (tmp_path / "retired_tool.json").write_text("{}")
    capsys.readouterr()
    assert main(["contracts", "check", "--out", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "open_dispute: changed at /parameters/properties/amount/pattern" in out
    assert "retired_tool: removed" in out
