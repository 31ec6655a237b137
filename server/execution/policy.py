"""Who may use which tool: a decision per (identity, tool), from the policy file's rules.

    allow              offered, called, executed
    approval_required  offered and called; the call comes back marked, and runs only when a
                       caller whose own decision is `allow` invokes it (the approval)
    deny               left out of the prompt and the grammar; asked for by name: 403
    hidden             left out too, and answered as a tool that does not exist: 404 on its
                       routes, never named in any error

Rules are tried in order; the first that matches decides, else `default`. A rule matches a
tool by name (`fnmatch` patterns), and optionally by catalog metadata (kinds, risks: only
registered contracts have them) and by the caller's tenant and roles."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Literal

from contracts import Contract
from server.identity import Caller

Decision = Literal["allow", "approval_required", "deny", "hidden"]
DECISIONS: tuple[Decision, ...] = ("allow", "approval_required", "deny", "hidden")


@dataclass(frozen=True)
class Principal:
    """The caller as the policy sees it: from the API key when keys are on, else from the
    trusted identity headers the policy names."""

    tenant: str | None
    roles: tuple[str, ...]
    name: str | None = None

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "tenant": self.tenant, "roles": list(self.roles)}


@dataclass(frozen=True)
class Rule:
    decision: Decision
    tools: tuple[str, ...] = ("*",)
    kinds: frozenset[str] | None = None
    risks: frozenset[str] | None = None
    tenants: frozenset[str] | None = None
    roles: frozenset[str] | None = None
    # approval_required: the argument fields a human approves (None: every field).
    approve_fields: tuple[str, ...] | None = None
    line: int | None = None  # where the rule starts in its file

    def matches(self, principal: Principal, name: str, contract: Contract | None) -> bool:
        if not any(fnmatchcase(name, pattern) for pattern in self.tools):
            return False
        if self.kinds is not None and (contract is None or
                                       contract.catalog.kind not in self.kinds):
            return False
        if self.risks is not None and (contract is None or
                                       contract.catalog.risk not in self.risks):
            return False
        if self.tenants is not None and principal.tenant not in self.tenants:
            return False
        return self.roles is None or bool(self.roles.intersection(principal.roles))


@dataclass(frozen=True)
class Verdict:
    """A decision and where it came from (the rule's number, 1-based; None: the default)."""

    decision: Decision
    rule: int | None = None
    approve_fields: tuple[str, ...] | None = None

    def as_dict(self) -> dict[str, object]:
        return {"decision": self.decision, "rule": self.rule}


@dataclass(frozen=True)
class ToolPolicy:
    rules: tuple[Rule, ...] = ()
    default: Decision = "allow"
    # Registered catalogs: a request may name one (strictcall.catalog) instead of tools.
    catalogs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # With API keys off, the caller's tenant and roles come from these headers.
    tenant_header: str = "X-Tenant-Id"
    roles_header: str = "X-Roles"
    source: str | None = None  # the file it was loaded from (None: the built-in allow-all)

    def decide(self, principal: Principal, name: str, contract: Contract | None) -> Verdict:
        for number, rule in enumerate(self.rules, start=1):
            if rule.matches(principal, name, contract):
                return Verdict(rule.decision, number, rule.approve_fields)
        return Verdict(self.default)

    def principal(self, caller: Caller) -> Principal:
        identity = caller.identity
        if identity is not None:
            return Principal(identity.tenant, tuple(identity.roles), identity.name)
        lowered = {k.lower(): v for k, v in caller.headers.items()}
        roles = lowered.get(self.roles_header.lower(), "")
        return Principal(lowered.get(self.tenant_header.lower()) or None,
                         tuple(r.strip() for r in roles.split(",") if r.strip()))

    def visible_names(self, principal: Principal,
                      contracts: Iterable[Contract]) -> list[str]:
        """Registered tools this caller may know of: not hidden, not retired."""
        return sorted(c.name for c in contracts if c.catalog.lifecycle != "retired"
                      and self.decide(principal, c.name, c).decision != "hidden")
