from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from server.api.app import create_app
from server.engines.scripted import ScriptedEngine
from server.settings import Settings
from tests.server.execution import exec_contracts

HERE = Path(__file__).parent
CONTRACTS = ["tests.server.execution.exec_contracts", "contracts.examples"]


class Script:
    """The reply the test sets; a repair prompt gets `repairs` in turn."""

    def __init__(self) -> None:
        self.reply = "[]"
        self.repairs: list[str] = []

    def __call__(self, prompt: str) -> str:
        if "is not valid yet" in prompt.rsplit("<|im_start|>user", 1)[-1]:
            return self.repairs.pop(0)
        return self.reply

    def calls(self, *calls: tuple[str, dict]) -> None:
        self.reply = json.dumps([{"name": n, "arguments": a} for n, a in calls],
                                separators=(",", ":"))


@pytest.fixture()
def script():
    return Script()


@pytest.fixture()
def spans():
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


@pytest.fixture()
def audit_path(tmp_path):
    return tmp_path / "audit.jsonl"


@pytest.fixture()
def app_client(model_dir, script, spans, tmp_path, audit_path):
    exec_contracts.LEDGER.clear()
    exec_contracts.FLAKY["fail_first"] = 1

    def make(keys=None, **overrides):
        settings = Settings(**{"served_model_name": "scripted", "contracts": CONTRACTS,
                               "policy": HERE / "exec_policy.yaml", "warm_grammars": False,
                               "audit_log": audit_path, "tools_db": tmp_path / "t.sqlite3",
                               **overrides})
        return TestClient(create_app(settings, lambda s: ScriptedEngine(model_dir, script),
                                     tracer_provider=spans[0], keys=keys))
    return make


@pytest.fixture()
def client(app_client):
    with app_client() as c:
        yield c


def audit(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def who(tenant: str = "acme", *roles: str) -> dict[str, str]:
    return {"X-Tenant-Id": tenant, "X-Roles": ",".join(roles)}


def chat(client, tools, *, headers=None, choice="required", content="help", **extra):
    body = {"model": "scripted", "messages": [{"role": "user", "content": content}],
            "tools": [t if isinstance(t, dict) else {"type": "function",
                                                     "function": {"name": t}} for t in tools],
            "tool_choice": choice if not isinstance(choice, str) or choice in
            ("auto", "none", "required") else {"type": "function", "function": {"name": choice}},
            **extra}
    return client.post("/v1/chat/completions", json=body, headers=headers or who())
