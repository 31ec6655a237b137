"""The policy file: YAML and TOML, decisions by first matching rule, and one-line errors
that name the file's line."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts import ContractRegistry
from server.execution import PolicyFileError, Principal, load_policy

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def registry():
    reg = ContractRegistry()
    reg.load("tests.server.execution.exec_contracts")
    reg.load("contracts.examples")
    return reg


def decide(policy, registry, tool, tenant="acme", roles=()):
    return policy.decide(Principal(tenant, tuple(roles)), tool, registry.get(tool)).decision


def test_the_first_matching_rule_decides(registry):
    policy = load_policy(HERE / "exec_policy.yaml", registry)
    assert decide(policy, registry, "charge_card", roles=["admin"]) == "allow"
    assert decide(policy, registry, "charge_card", roles=["support-lead"]) == "hidden"
    assert decide(policy, registry, "refund_order", tenant="guest",
                  roles=["support-lead"]) == "deny"  # rule 3 comes before rule 4
    assert decide(policy, registry, "refund_order", roles=["support-lead"]) == "allow"
    verdict = policy.decide(Principal("acme", ("support-agent",)), "refund_order",
                            registry.get("refund_order"))
    assert (verdict.decision, verdict.rule, verdict.approve_fields) == \
        ("approval_required", 5, ("order_id", "amount"))
    assert decide(policy, registry, "email_customers") == "deny"
    assert decide(policy, registry, "email_customers", tenant="other") == "allow"
    assert decide(policy, registry, "lookup_order", tenant="guest") == "allow"  # a read
    assert decide(policy, registry, "not_registered") == "allow"  # the default
    assert policy.catalogs["orders"][0] == "lookup_order"


def test_the_shipped_support_policy_loads(registry):
    policy = load_policy(Path("contracts/support_policy.yaml"), registry)
    assert "support" in policy.catalogs


def test_toml_reads_the_same(tmp_path, registry):
    path = tmp_path / "policy.toml"
    path.write_text('default = "deny"\n[catalogs]\norders = ["lookup_order"]\n\n'
                    '[[rules]]\ntools = ["lookup_order"]\ndecision = "allow"\n')
    policy = load_policy(path, registry)
    assert decide(policy, registry, "lookup_order") == "allow"
    assert decide(policy, registry, "refund_order") == "deny"


@pytest.mark.parametrize(("suffix", "text", "line", "says"), [
    (".yaml", "default: allow\nrules:\n  - tools: [x]\n    decision: maybe\n", 4,
     "rules.0.decision"),
    (".yaml", "rules:\n  - {tools: [x], decision: allow}\n  - {tool: [y], decision: deny}\n", 3,
     "rules.1.tool"),
    (".yaml", "default: allow\ncatalogs:\n  orders: [lookup_order, nope]\n", 3,
     "'nope' cannot be in a catalog"),
    (".yaml", "catalogs:\n  old: [ancient_lookup]\n", 2, "it is retired"),
    (".yaml", "rules:\n  - {tools: [refund_order], decision: approval_required,\n"
     "     approve_fields: [amount, colour]}\n", 3, "['colour'] are not fields"),
    (".yaml", "rules:\n  - {tools: [x], decision: allow, approve_fields: [a]}\n", 2,
     "only goes with decision: approval_required"),
    (".yaml", "rules: [\n  {tools: [x]\n", 3, "the file must be YAML"),
    (".toml", 'default = "allow"\n\n[[rules]]\ntools = ["x"]\ndecision = "allow"\n\n'
     '[[rules]]\ntools = ["y"]\ndecision = "perhaps"\n', 9, "rules.1.decision"),
    (".toml", 'default = "allow"\nrules = [\n', 2, "not valid TOML"),
    (".toml", 'defualt = "allow"\n', 1, "defualt"),
])
def test_errors_name_the_line(tmp_path, registry, suffix, text, line, says):
    path = tmp_path / f"policy{suffix}"
    path.write_text(text)
    with pytest.raises(PolicyFileError) as raised:
        load_policy(path, registry)
    message = str(raised.value)
    assert f"line {line}:" in message and says in message and "\n" not in message, message


def test_a_missing_file_is_one_line(tmp_path, registry):
    with pytest.raises(PolicyFileError, match="cannot read the policy file"):
        load_policy(tmp_path / "none.yaml", registry)
