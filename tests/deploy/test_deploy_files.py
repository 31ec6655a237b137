"""deploy/ is checked here, since no Docker or Kubernetes runs in the tests: the manifests,
rendered as kustomize renders them (its namespace on each), validate against Kubernetes'
own schemas (kubernetes-validate, strict: no field Kubernetes would not know); every flag
and STRICTCALL_ variable the Compose file and the manifests pass is one `strictcall serve`
takes; the shipped keys and secrets are placeholders StrictCall refuses to start with;
every container runs without root or privilege escalation; StrictCall's readiness is
/health and its warm-up has a startupProbe; the image keeps its state on a volume; and the
upstream image's requirements pin what pyproject.toml pins. The Compose service is started
with its own command and environment in the replicas tier (tests/server/state/
test_faults.py)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
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
    (deployment,) = [d for d in manifests() if d["kind"] == "StatefulSet"
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
    secret = {e["name"]: e["valueFrom"]["secretKeyRef"]["key"] for e in container["env"]
              if "secretKeyRef" in e.get("valueFrom", {})}
    assert secret["STRICTCALL_RATE_LIMIT_URL"] == "STRICTCALL_RATE_LIMIT_URL"  # with its password


def test_the_policies_load_and_the_shipped_secrets_are_refused(tmp_path):
    """The example keys and the Secrets' values are public placeholders: StrictCall refuses
    each of them, so a deployment cannot run on them by mistake."""
    from server.execution import load_policy
    from server.identity import KeyFileError, KeyRing
    from server.state import StateError, check_urls
    from server.wiring import load_contracts

    registry = load_contracts(["contracts.examples"])
    load_policy(DEPLOY / "policy.example.yaml", registry)
    by_kind = {(d["kind"], d["metadata"]["name"]): d for d in manifests()}
    policy = tmp_path / "policy.yaml"
    policy.write_text(by_kind[("ConfigMap", "strictcall-policy")]["data"]["policy.yaml"])
    load_policy(policy, registry)
    keys = tmp_path / "keys.yaml"
    keys.write_text(by_kind[("Secret", "strictcall-api-keys")]["stringData"]["api-keys.yaml"])
    for path in (DEPLOY / "api-keys.example.yaml", keys):
        with pytest.raises(KeyFileError, match="placeholder"):
            KeyRing.load(path)
    state = by_kind[("Secret", "strictcall-state")]["stringData"]
    with pytest.raises(StateError, match="placeholder password"):
        check_urls(Settings(state_url=state["STRICTCALL_STATE_URL"]))
    with pytest.raises(StateError, match="--state-secret is a placeholder"):
        check_urls(Settings(state_url="memory://",
                            state_secret=state["STRICTCALL_STATE_SECRET"]))
    with pytest.raises(StateError, match="--rate-limit-url .* placeholder password"):
        check_urls(Settings(state_url="memory://",
                            rate_limit_url=state["STRICTCALL_RATE_LIMIT_URL"]))
    # Postgres and Redis themselves refuse the placeholder before they start.
    for name in ("postgres", "redis"):
        (workload,) = [d for d in manifests() if d["metadata"]["name"] == name
                       and d["kind"] in ("Deployment", "StatefulSet")]
        (container,) = workload["spec"]["template"]["spec"]["containers"]
        script = " ".join(container["args"])
        assert 'change-me*) echo' in script and "exit 1" in script, name


def test_only_strictcall_reaches_vllm_redis_and_postgres():
    policies = {d["spec"]["podSelector"]["matchLabels"]["app"]: d for d in manifests()
                if d["kind"] == "NetworkPolicy"}
    assert set(policies) == {"vllm", "redis", "postgres"}
    for policy in policies.values():
        (rule,) = policy["spec"]["ingress"]
        assert rule["from"] == [{"podSelector": {"matchLabels": {"app": "strictcall"}}}]


def rendered() -> list[dict]:
    """The manifests as `kubectl apply -k deploy/k8s` sends them: kustomization.yaml's
    resources, each in its namespace."""
    kustomization = yaml.safe_load((DEPLOY / "k8s" / "kustomization.yaml").read_text())
    out = []
    for name in kustomization["resources"]:
        for doc in yaml.safe_load_all((DEPLOY / "k8s" / name).read_text()):
            if doc and doc["kind"] != "Namespace":
                doc.setdefault("metadata", {})["namespace"] = kustomization["namespace"]
            if doc:
                out.append(doc)
    return out


def test_the_rendered_manifests_validate_against_kubernetes_schemas():
    import kubernetes_validate

    docs = rendered()
    assert {d["kind"] for d in docs} >= {"Deployment", "StatefulSet", "Service", "Secret",
                                         "ConfigMap", "PodDisruptionBudget", "Namespace",
                                         "NetworkPolicy"}
    for doc in docs:  # raises ValidationError naming the field
        kubernetes_validate.validate(doc, "1.30", strict=True)
    broken = {**docs[-1], "spec": {**docs[-1].get("spec", {}), "replicaz": 2}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, "1.30", strict=True)  # the check bites


def test_every_container_runs_without_root_or_privilege_escalation():
    workloads = [d for d in rendered() if d["kind"] in ("Deployment", "StatefulSet")]
    assert len(workloads) == 4
    for workload in workloads:
        pod = workload["spec"]["template"]["spec"]
        for container in pod["containers"]:
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False, container["name"]
            assert context["capabilities"]["drop"] == ["ALL"], container["name"]
            if container["name"] != "vllm":  # vLLM's image needs its root home
                assert pod["securityContext"]["runAsNonRoot"] is True, container["name"]


def test_strictcall_warms_up_under_a_startup_probe_and_refuses_embedded_state():
    container = strictcall_container()
    assert container["startupProbe"]["tcpSocket"]["port"] == "http"
    assert container["startupProbe"]["failureThreshold"] * \
        container["startupProbe"]["periodSeconds"] >= 300  # five minutes of warm-up
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["STRICTCALL_REPLICAS"] == "2" and env["STRICTCALL_UPSTREAM_RESOLVE"] == "true"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["cache"] == "/var/cache/strictcall"  # the journal is writable there...
    (workload,) = [d for d in manifests() if d["metadata"]["name"] == "strictcall"
                   and d["kind"] == "StatefulSet"]
    claims = [c["metadata"]["name"] for c in workload["spec"]["volumeClaimTemplates"]]
    assert "cache" in claims  # ...on a volume of its own that outlives the pod
    names = {e["name"]: e.get("valueFrom") for e in container["env"]}
    assert names["STRICTCALL_REPLICA_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}


def test_the_image_keeps_its_state_on_a_volume():
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    cache = re.search(r"STRICTCALL_CACHE_DIR=(\S+)", dockerfile).group(1)
    assert f'VOLUME ["{cache}"]' in dockerfile
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    assert cache in compose["services"]["strictcall"]["volumes"]


def test_strictcall_is_ready_only_while_health_says_ok():
    container = strictcall_container()
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    # Liveness is the event loop answering, not /health (a down upstream is no restart)
    # and not a TCP connect (which passes while one request holds the loop).
    assert container["livenessProbe"]["httpGet"]["path"] == "/livez"


def test_kustomization_lists_every_manifest():
    listed = yaml.safe_load((DEPLOY / "k8s" / "kustomization.yaml").read_text())["resources"]
    on_disk = sorted(p.name for p in (DEPLOY / "k8s").glob("*.yaml")
                     if p.name != "kustomization.yaml")
    assert sorted(listed) == on_disk


def _pins(text: str) -> dict[str, str]:
    lines = [line.split("#")[0].strip() for line in text.splitlines()]
    return dict(line.split("==") for line in lines if line)


PROJECT_PINS = dict(
    re.match(r"([A-Za-z0-9_.\[\]-]+)==(\S+)", d).groups()
    for d in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"])
# What each image's engine brings or needs not: the embedded engines' own libraries.
ENGINE_ONLY = {"torch", "xgrammar", "llguidance", "outlines-core", "accelerate"}
# vLLM brings these in its own versions (its pins win in Dockerfile.gpu and .venv-vllm).
VLLM_BRINGS = {"transformers", "tokenizers", "jinja2", "safetensors", "numpy", "fastapi",
               "uvicorn", "httpx", "pydantic", "pyyaml", "prometheus-client",
               "opentelemetry-api", "opentelemetry-sdk"}


def test_the_upstream_image_pins_what_pyproject_pins_and_leaves_nothing_out():
    """Installed with --no-deps, an image holds only what its requirements name: a
    dependency left out is a 500 at its first import (the dialogue's libraries once were)."""
    wanted = _pins((DEPLOY / "requirements-upstream.txt").read_text())
    assert {k: PROJECT_PINS.get(k) for k in wanted} == wanted
    assert not {"torch", "xgrammar", "llguidance", "outlines-core"} & set(wanted)
    assert set(PROJECT_PINS) - set(wanted) == ENGINE_ONLY | {"gguf"}


def test_the_vllm_image_adds_what_vllm_does_not_bring():
    wanted = _pins((DEPLOY / "requirements-vllm.txt").read_text())
    assert {k: PROJECT_PINS.get(k) for k in wanted} == wanted
    assert set(PROJECT_PINS) - set(wanted) == ENGINE_ONLY | VLLM_BRINGS
    gpu = (ROOT / "Dockerfile.gpu").read_text()
    assert "pip install vllm==0.33.0 -r requirements-vllm.txt" in gpu
    assert "-r deploy/requirements-vllm.txt" in (ROOT / "Makefile").read_text()


def test_the_image_runs_the_upstream_engine_and_the_gateway_streams():
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert "pip install -r requirements-upstream.txt" in dockerfile
    assert "pip install --no-deps ." in dockerfile  # not the main pins (torch, xgrammar)
    assert '"--engine", "upstream"' in dockerfile.splitlines()[-1]
    nginx = (DEPLOY / "nginx.conf").read_text()
    assert "proxy_buffering off;" in nginx  # server-sent events pass as they come
    assert "non_idempotent" not in nginx  # a POST is never retried by the gateway
    # A 503 replica (upstream down, shutting down) is skipped, as the comment says.
    assert re.search(r"proxy_next_upstream [^;]*http_503", nginx)
