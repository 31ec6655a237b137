"""API keys over a ScriptedEngine: 401 / 403 problems (Anthropic's shape on /v1/messages),
open routes, keys hashed and never logged, and runtime contract fields taken from the key's
identity, never from a client header."""

from __future__ import annotations

import hashlib
import json
import logging
import time

import pytest
from fastapi.testclient import TestClient

from server.api.app import create_app
from server.engines.scripted import ScriptedEngine
from server.identity import KeyFileError, KeyRing
from server.settings import Settings
from tests.scripted import assert_error, assert_problem

ACME_KEY = "sk-acme-0123456789abcdef"
GLOBEX_KEY = "sk-globex-fedcba9876543210"
OPS_KEY = "sk-ops-metrics-00000000000"
KEY_FILE = f"""
keys:
  - key: {ACME_KEY}
    name: acme-agent
    tenant: acme
    roles: [chat]
  - key: "sha256:{hashlib.sha256(GLOBEX_KEY.encode()).hexdigest()}"
    name: globex-agent
    tenant: globex
  - key: {OPS_KEY}
    name: prometheus
    roles: [metrics]
"""
TICKET = ('[{"name":"create_support_ticket","arguments":'
          '{"title":"VPN down","queue":"ops","description":"since 9am"}}]')


@pytest.fixture()
def client(model_dir, tmp_path):
    path = tmp_path / "keys.yaml"
    path.write_text(KEY_FILE)
    settings = Settings(served_model_name="scripted", contracts=["contracts.examples"],
                        api_keys_file=path, metrics_auth=True)
    app = create_app(settings, lambda s: ScriptedEngine(model_dir, lambda prompt: TICKET))
    with TestClient(app) as c:
        yield c


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def ticket_call(client, headers):
    body = {"model": "scripted", "messages": [{"role": "user", "content": "help"}],
            "tools": [{"type": "function", "function": {"name": "create_support_ticket"}}],
            "tool_choice": "required"}
    resp = client.post("/v1/chat/completions", json=body, headers=headers)
    assert resp.status_code == 200, resp.text
    (call,) = resp.json()["choices"][0]["message"]["tool_calls"]
    return json.loads(call["function"]["arguments"])


def test_missing_or_wrong_key_is_401_problem(client):
    body = {"model": "scripted", "messages": [{"role": "user", "content": "hi"}]}
    missing = client.post("/v1/chat/completions", json=body)
    assert_problem(missing, 401, says="Authorization: Bearer")
    assert missing.headers["www-authenticate"].startswith("Bearer")
    wrong = client.post("/v1/chat/completions", json=body, headers=bearer("sk-guess-" + "0" * 16))
    assert_problem(wrong, 401, says="not one this server knows")
    assert "sk-guess" not in wrong.text
    assert client.post("/v1/chat/completions", json=body,
                       headers=bearer(ACME_KEY)).status_code == 200


def test_messages_api_takes_x_api_key_and_answers_in_anthropic_shape(client):
    body = {"model": "scripted", "max_tokens": 16,
            "messages": [{"role": "user", "content": "hi"}]}
    assert_error(client.post("/v1/messages", json=body), 401, kind="authentication_error",
                 says="x-api-key")
    assert client.post("/v1/messages", json=body,
                       headers={"x-api-key": ACME_KEY}).status_code == 200
    # x-api-key is the Messages API's; the OpenAI routes take a bearer token only
    chat = {"model": "scripted", "messages": [{"role": "user", "content": "hi"}]}
    assert client.post("/v1/chat/completions", json=chat,
                       headers={"x-api-key": ACME_KEY}).status_code == 401


def test_roles_decide_what_a_key_may_call(client):
    assert client.get("/health").status_code == 200  # probes carry no key
    assert_problem(client.get("/metrics"), 401)
    assert_problem(client.get("/metrics", headers=bearer(ACME_KEY)), 403, says="'metrics'")
    assert client.get("/metrics", headers=bearer(OPS_KEY)).status_code == 200
    models = client.get("/v1/models", headers=bearer(OPS_KEY))
    assert_problem(models, 403, says="prometheus")


def test_tenant_comes_from_the_key_and_a_header_cannot_override_it(client):
    args = ticket_call(client, {**bearer(ACME_KEY), "X-Tenant-Id": "globex"})
    assert args["tenant_id"] == "acme"
    assert ticket_call(client, bearer(GLOBEX_KEY))["tenant_id"] == "globex"  # hashed entry
    validated = client.post(
        "/v1/contracts/create_support_ticket/validate",
        json={"arguments": {"title": "t", "queue": "ops", "description": "d"}},
        headers={**bearer(GLOBEX_KEY), "X-Tenant-Id": "acme"}).json()
    assert validated["valid"] and validated["arguments"]["tenant_id"] == "globex"


def test_a_key_without_the_claim_a_contract_needs_is_400(model_dir):
    body = {"model": "scripted", "messages": [{"role": "user", "content": "help"}],
            "tools": [{"type": "function", "function": {"name": "create_support_ticket"}}],
            "tool_choice": "required"}
    ring = KeyRing.of([{"key": "sk-admin-without-tenant", "name": "root", "roles": ["admin"]}])
    settings = Settings(served_model_name="scripted", contracts=["contracts.examples"])
    app = create_app(settings, lambda s: ScriptedEngine(model_dir, lambda p: TICKET), keys=ring)
    with TestClient(app) as other:
        resp = other.post("/v1/chat/completions", json=body,
                          headers={**bearer("sk-admin-without-tenant"), "X-Tenant-Id": "acme"})
    assert_problem(resp, 400, says="'tenant'")


def test_keys_are_never_logged(client, caplog):
    with caplog.at_level(logging.DEBUG):
        client.post("/v1/chat/completions", headers=bearer(ACME_KEY),
                    json={"model": "scripted", "messages": [{"role": "user", "content": "x"}]})
        client.post("/v1/chat/completions", headers=bearer(ACME_KEY + "x"), json={})
    assert ACME_KEY not in caplog.text


@pytest.mark.parametrize(("text", "says"), [
    ("keys: [{key: short, name: a}]", "at least 16"),
    ("keys: [{key: 'sha256:abc', name: a}]", "64 hex digits"),
    ("keys: [{key: sk-0123456789abcdef, name: a, roles: [root]}]", "roles"),
    ("keys: [{key: sk-0123456789abcdef, name: a}, {key: sk-0123456789abcdef, name: b}]",
     "twice"),
    ("{not yaml", "not YAML"),
    ('{"keys": [{"key": "sk-0123456789abcdef", "name": "a", "color": "red"}]}', "color"),
])
def test_bad_key_files_are_one_line_errors(tmp_path, text, says):
    path = tmp_path / "keys.yaml"
    path.write_text(text)
    with pytest.raises(KeyFileError, match=says) as raised:
        KeyRing.load(path)
    assert "sk-0123456789abcdef" not in str(raised.value)
    assert "\n" not in str(raised.value)


def test_json_key_file_and_constant_time_lookup(tmp_path):
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({"keys": [{"key": ACME_KEY, "name": "a", "tenant": "t"}]}))
    ring = KeyRing.load(path)
    assert ring.identify(ACME_KEY).claims() == {"subject": "a", "roles": "chat", "tenant": "t"}
    assert ring.identify(ACME_KEY[:-1]) is None
    assert ring.identify("a\ud800") is None  # any string a header can carry


def test_a_revoked_key_stops_working_when_the_file_changes(client, tmp_path):
    """The key file is read again when it changes (and on SIGHUP): no restart needed. A
    file that no longer loads keeps the keys in force."""
    assert client.get("/v1/models", headers=bearer(ACME_KEY)).status_code == 200
    path = tmp_path / "keys.yaml"
    path.write_text(KEY_FILE.replace(f"  - key: {ACME_KEY}\n    name: acme-agent\n"
                                     "    tenant: acme\n    roles: [chat]\n", ""))
    deadline = time.monotonic() + 10  # the watch looks every 2 s
    while client.get("/v1/models", headers=bearer(ACME_KEY)).status_code != 401:
        assert time.monotonic() < deadline, "the revoked key still works"
        time.sleep(0.2)
    assert client.get("/v1/models", headers=bearer(GLOBEX_KEY)).status_code == 200
    path.write_text("keys: [{key: short, name: x}]")  # broken: the last good keys stay
    time.sleep(2.5)
    assert client.get("/v1/models", headers=bearer(GLOBEX_KEY)).status_code == 200


@pytest.mark.parametrize("key", ["sk-change-me-agent-0000000000000000", "CHANGEME-0123456789ab"])
def test_a_placeholder_key_is_refused(tmp_path, key):
    path = tmp_path / "keys.yaml"
    path.write_text(f"keys: [{{key: {key}, name: agent}}]")
    with pytest.raises(KeyFileError, match="placeholder") as refused:
        KeyRing.load(path)
    assert key not in str(refused.value)  # a key is never repeated


def test_metrics_need_the_metrics_role_by_default_when_keys_are_on(model_dir, tmp_path):
    path = tmp_path / "keys.yaml"
    path.write_text(KEY_FILE)
    settings = Settings(served_model_name="scripted", api_keys_file=path)
    with TestClient(create_app(settings, lambda s: ScriptedEngine(model_dir, lambda p: ""))) as c:
        assert c.get("/metrics").status_code == 401
        assert c.get("/metrics", headers=bearer(ACME_KEY)).status_code == 403
        assert c.get("/metrics", headers=bearer(OPS_KEY)).status_code == 200


def test_the_cache_headers_never_tell_a_tenant_what_another_compiled(client):
    """The grammar cache is shared; whether a schema was compiled before is told only to
    a tenant that used it itself (a hit on another tenant's schema says nothing)."""
    schema = {"type": "object", "properties": {"tenant_probe_x": {"type": "integer"}}}
    first = client.post("/v1/grammars/compile", json=schema, headers=bearer(ACME_KEY))
    assert first.status_code == 200 and first.json()["cache"] == "miss"
    other = client.post("/v1/grammars/compile", json=schema, headers=bearer(GLOBEX_KEY))
    assert other.status_code == 200
    assert not {"cache", "lookup_ms", "compile_ms"} & set(other.json())
    again = client.post("/v1/grammars/compile", json=schema, headers=bearer(GLOBEX_KEY))
    assert again.json()["cache"] == "hit"  # its own use, now
    # A chat: the contract's call grammar, compiled at startup by nobody's request.
    body = {"model": "scripted", "messages": [{"role": "user", "content": "help"}],
            "tools": [{"type": "function", "function": {"name": "create_support_ticket"}}],
            "tool_choice": "required"}
    seen = client.post("/v1/chat/completions", json=body, headers=bearer(GLOBEX_KEY))
    assert seen.status_code == 200 and "X-StrictCall-Grammar-Cache" not in seen.headers
    again = client.post("/v1/chat/completions", json=body, headers=bearer(GLOBEX_KEY))
    assert again.headers["X-StrictCall-Grammar-Cache"] == "hit"
