"""The tools a request may see: its own tools plus a named catalog's, less retired ones and
those the policy denies or hides, and, when more are left than fit or a catalog was named,
only the k most relevant (selection.py). Only these enter the prompt and the grammar, so
a tool left out cannot even be written by the model.

Refusals: a tool_choice that names a denied tool is a 403; one that names a hidden tool is
left to the planner, which answers it exactly as an unknown name (the hidden tool is not in
the request's tools any more, and error messages list visible tools only)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from contracts import Contract, ContractRegistry
from server.errors import Forbidden, InvalidRequest
from server.execution.policy import Principal, ToolPolicy, Verdict
from server.execution.selection import Selection, select, tool_text
from server.execution.tracing import RequestTrace
from server.task import NamedTool, Task, ToolDef, user_text


@dataclass(frozen=True)
class Offer:
    task: Task  # the task with only the visible tools
    visible: tuple[str, ...]
    verdicts: Mapping[str, Verdict]  # of the visible tools: allow or approval_required
    principal: Principal
    deprecated: tuple[str, ...] = ()
    selection: Selection | None = None
    reported: bool = False  # the response says which tools were visible

    def extension(self) -> dict[str, Any] | None:
        if not self.reported:
            return None
        out: dict[str, Any] = {"visible": list(self.visible)}
        if self.selection is not None:
            out["selection"] = self.selection.as_dict()
        if self.deprecated:
            out["deprecated"] = list(self.deprecated)
        return out

    def headers(self) -> dict[str, str]:
        """A `Warning` (RFC 7234's 299) for each deprecated tool offered."""
        if not self.deprecated:
            return {}
        return {"Warning": ", ".join(
            f'299 strictcall "tool {name!r} is deprecated; move to its replacement"'
            for name in self.deprecated)}


@dataclass(frozen=True)
class ToolOffers:
    registry: ContractRegistry
    policy: ToolPolicy
    max_tools: int
    select_k: int
    selection: bool = True  # False: over the budget is a 400, as without this layer

    def offer(self, task: Task, principal: Principal, trace: RequestTrace,
              *, catalog: str | None = None, k: int | None = None) -> Offer:
        tools = self._with_catalog(list(task.tools), catalog, task)
        kept: list[ToolDef] = []
        verdicts: dict[str, Verdict] = {}
        denied: list[str] = []
        for tool in tools:
            name = tool.name
            contract = self.registry.get(name)
            if contract is not None and contract.catalog.lifecycle == "retired":
                trace.event("policy_decision", tool=name, decision="retired")
                continue
            verdict = self.policy.decide(principal, name, contract)
            trace.event("policy_decision", tool=name, decision=verdict.decision,
                        rule=verdict.rule)
            if verdict.decision in ("allow", "approval_required"):
                kept.append(tool)
                verdicts[name] = verdict
            elif verdict.decision == "deny":
                denied.append(name)
        self._refuse_denied_choice(task, principal, kept, denied)
        chosen = self._select(kept, task, catalog=catalog, k=k)
        visible = tuple(t.name for t in chosen.tools)
        trace.event("tool_selection_set_built", visible=visible, offered=len(tools),
                    selection=chosen.selection.as_dict() if chosen.selection else None)
        deprecated = tuple(n for n in visible if (c := self.registry.get(n)) is not None
                           and c.catalog.lifecycle == "deprecated")
        reported = self.policy.source is not None or chosen.selection is not None \
            or len(visible) != len(tools) or bool(deprecated)
        left_out = tuple(t for t in kept if t.name not in visible)
        return Offer(replace(task, tools=chosen.tools, left_out=left_out), visible,
                     {n: verdicts[n] for n in visible}, principal,
                     deprecated, chosen.selection, reported and bool(tools))

    def _with_catalog(self, tools: list[ToolDef], catalog: str | None,
                      task: Task) -> list[ToolDef]:
        if catalog is None:
            return tools
        if catalog not in self.policy.catalogs:
            known = sorted(self.policy.catalogs)
            raise InvalidRequest(
                f"no catalog named {catalog!r}; this server has {known}" if known else
                f"no catalog named {catalog!r}; this server has none (declare catalogs in "
                "the --policy file)", param=f"{task.names.options}.catalog",
                code="unknown_catalog")
        have = {t.name for t in tools}
        return tools + [ToolDef(name) for name in self.policy.catalogs[catalog]
                        if name not in have]

    def _refuse_denied_choice(self, task: Task, principal: Principal, kept: list[ToolDef],
                              denied: list[str]) -> None:
        choice, names = task.tool_choice, task.names
        who = f"tenant {principal.tenant!r}, roles {list(principal.roles)}"
        if isinstance(choice, NamedTool) and choice.name in denied:
            raise Forbidden(f"the policy denies tool {choice.name!r} to this caller "
                            f"({who}); ask for another tool or a key with other roles",
                            param=names.tool_choice_name, code="tool_denied")
        if choice == "required" and not kept and denied:
            raise Forbidden(f"every tool this request offers is denied to this caller "
                            f"({who}): {sorted(denied)}", param=names.tools,
                            code="tool_denied")

    def _select(self, tools: list[ToolDef], task: Task, *, catalog: str | None,
                k: int | None) -> _Chosen:
        over = len(tools) > self.max_tools
        if not self.selection or not (catalog is not None or over) or not tools:
            return _Chosen(tuple(tools), None)
        k = min(k or self.select_k, self.max_tools)
        if not over and catalog is not None and len(tools) <= k:
            return _Chosen(tuple(tools), None)
        pinned = [task.tool_choice.name] if isinstance(task.tool_choice, NamedTool) else []
        by_name = {t.name: t for t in tools}
        newest = next((t.text for t in reversed(task.turns) if t.role == "user"), None)
        picked = select({n: self._text(t) for n, t in by_name.items()}, user_text(task.turns),
                        k=k, reason="catalog" if catalog is not None else "over_budget",
                        pinned=pinned, newest=newest)
        return _Chosen(tuple(by_name[n] for n in picked.visible), picked)

    def _text(self, tool: ToolDef) -> str:
        contract: Contract | None = self.registry.get(tool.name)
        if contract is not None:
            return tool_text(contract.name, contract.description, contract.schema())
        return tool_text(tool.name, tool.description, tool.parameters)


@dataclass(frozen=True)
class _Chosen:
    tools: tuple[ToolDef, ...]
    selection: Selection | None
