"""`--engine upstream` misconfigured ends `strictcall serve` with one line (exit 2)."""

from __future__ import annotations

import pytest

from tests.server.test_cli import serve_command


@pytest.mark.parametrize(("args", "says"), [
    ((), "needs the vLLM server(s) to send requests to: --upstream"),
    (("--upstream", "vllm:8000"), "is not an http(s) URL"),
    (("--upstream", "http://vllm:8000", "--grammar-backend", "outlines"),
     "--grammar-backend outlines cannot apply"),
    (("--upstream", "http://vllm:8000", "--cold-compile", "bridge"),
     "--cold-compile bridge cannot apply"),
    (("--upstream", "http://vllm:8000", "--model", "/nonexistent"),
     "needs config.json and the tokenizer files"),
    (("--upstream", "http://vllm:8000", "--upstream-json", "compact"), "invalid choice"),
])
def test_upstream_misconfiguration_is_one_line(args, says):
    done = serve_command("--engine", "upstream", *args)
    assert done.returncode == 2
    assert says in done.stderr
    assert "Traceback" not in done.stderr
