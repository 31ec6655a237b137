"""deploy/ is checked here, since no Docker or Kubernetes runs in the tests: every flag and
STRICTCALL_ variable the Compose file and the manifests pass is one `strictcall serve`
takes, the example keys and policy load, StrictCall's readiness is /health, and the
upstream image's requirements pin what pyproject.toml pins."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

from server.cli_flags import flag_of, setting_fields
from server.settings import ENV_PREFIX, Settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
FLAGS = {flag_of(name, field) for name, field in setting_fields()}
FIELDS = {name for name, _ in setting_fields()}


def manifests() -> list[dict]:
    return [doc for path in sorted((DEPLOY / "k8s").glob("*.yaml"))
            if path.name != "kustomization.yaml"
            for doc in yaml.safe_load_all(path.read_text()) if doc]


def strictcall_container() -> dict:
    (deployment,) = [d for d in manifests() if d["kind"] == "Deployment"
                     and d["metadata"]["name"] == "strictcall"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def test_compose_and_manifests_pass_only_flags_and_variables_strictcall_takes():
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    service = compose["services"]["strictcall"]
    container = strictcall_container()
    args = [a for a in [*service["command"], *container["args"]] if a.startswith("--")]
    assert args and set(args) <= FLAGS, set(args) - FLAGS
    env = [*service["environment"], *(e["name"] for e in container["env"])]
    names = {v.removeprefix(ENV_PREFIX).lower() for v in env if v.startswith(ENV_PREFIX)}
    assert names and names <= FIELDS, names - FIELDS
    values = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    parsed = Settings(**{k.removeprefix(ENV_PREFIX).lower(): yaml.safe_load(v)
                         if v.startswith("[") else v for k, v in values.items()})
    assert parsed.upstream == ["http://vllm:8000"]
    assert parsed.rate_limit_url == "redis://redis:6379/0"


def test_the_example_keys_and_policy_load(tmp_path):
    from server.api.app import load_contracts
    from server.execution import load_policy
    from server.identity import KeyRing

    registry = load_contracts(["contracts.examples"])
    load_policy(DEPLOY / "policy.example.yaml", registry)
    assert len(KeyRing.load(DEPLOY / "api-keys.example.yaml")) == 2
    by_kind = {(d["kind"], d["metadata"]["name"]): d for d in manifests()}
    policy = tmp_path / "policy.yaml"
    policy.write_text(by_kind[("ConfigMap", "strictcall-policy")]["data"]["policy.yaml"])
    load_policy(policy, registry)
    keys = tmp_path / "keys.yaml"
    keys.write_text(by_kind[("Secret", "strictcall-api-keys")]["stringData"]["api-keys.yaml"])
    assert len(KeyRing.load(keys)) == 2


def test_strictcall_is_ready_only_while_health_says_ok():
    container = strictcall_container()
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    assert "httpGet" not in container["livenessProbe"]  # a down upstream is no restart


def test_kustomization_lists_every_manifest():
    listed = yaml.safe_load((DEPLOY / "k8s" / "kustomization.yaml").read_text())["resources"]
    on_disk = sorted(p.name for p in (DEPLOY / "k8s").glob("*.yaml")
                     if p.name != "kustomization.yaml")
    assert sorted(listed) == on_disk


def test_the_upstream_image_pins_what_pyproject_pins():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pinned = dict(re.match(r"([A-Za-z0-9_.\[\]-]+)==(\S+)", d).groups()
                  for d in project["dependencies"])
    lines = [line.split("#")[0].strip()
             for line in (DEPLOY / "requirements-upstream.txt").read_text().splitlines()]
    wanted = dict(line.split("==") for line in lines if line)
    assert {k: pinned.get(k) for k in wanted} == wanted
    assert not {"torch", "xgrammar", "llguidance", "outlines-core"} & set(wanted)


def test_the_image_runs_the_upstream_engine_and_the_gateway_streams():
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert "pip install -r requirements-upstream.txt" in dockerfile
    assert "pip install --no-deps ." in dockerfile  # not the main pins (torch, xgrammar)
    assert '"--engine", "upstream"' in dockerfile.splitlines()[-1]
    nginx = (DEPLOY / "nginx.conf").read_text()
    assert "proxy_buffering off;" in nginx  # server-sent events pass as they come
    assert "non_idempotent" not in nginx  # a POST is never retried by the gateway
