"""Configuration errors end the CLI with one readable line (exit 2), not a traceback."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from server.process import ROOT


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "server.cli", "serve", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed")
def test_vllm_engine_without_vllm_is_one_line():
    done = _serve("--engine", "vllm")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "vLLM is not installed" in line and "make setup-vllm" in line


@pytest.mark.parametrize(("args", "says"), [
    (("--model", "/nonexistent/model"), "/nonexistent/model"),
    (("--engine", "tensorrt"), "invalid choice"),
    (("--max-model-len", "4"), "max_model_len"),
    (("--engine", "vllm", "--grammar-backend", "llguidance"),
     "--grammar-backend llguidance is for the torch engine"),
])
def test_bad_configuration_is_one_line(args, says):
    done = _serve(*args)
    assert done.returncode == 2
    assert says in done.stderr
    assert "Traceback" not in done.stderr


def test_cuda_device_without_a_gpu_is_one_line():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this host has a GPU")
    done = _serve("--device", "cuda")
    assert done.returncode == 2 and "no CUDA GPU" in done.stderr
    assert "Traceback" not in done.stderr
