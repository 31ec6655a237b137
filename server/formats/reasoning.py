"""The free-reasoning first pass: how much a request may think, and the grammar pieces that
let it think freely before the constrained answer, in one decode.

The budget lives in the grammar (xgrammar's `any_text.max_tokens`): once the reasoning has
used it, only the end marker can follow, so every engine (torch, scripted, vLLM) forces the
marker at the same point, with no second prefill. The answer after the marker is the
request's own grammar; in free text it must hold a visible character, so the reply cannot
end right after the marker."""

from __future__ import annotations

from typing import Any

from server.options import Effort

# reasoning_effort -> token budget (0: no reasoning pass).
EFFORT_BUDGETS: dict[Effort, int] = {"none": 0, "minimal": 32, "low": 128, "medium": 512,
                                  "high": 2048}

# The reasoning block StrictCall defines for families trained without one (SmolLM2,
# Llama 3.x): opened in the prompt, closed by the model (or by the budget).
THINK_OPEN = "<think>\n"
THINK_END = "</think>"
THINK_INSTRUCTIONS = (
    "Before answering, think step by step in a few short sentences. Write your thinking "
    "first, end it with </think> on its own line, then give the answer.")

# Free text after the reasoning: at least one visible character first, and not "<": the
# text of end-of-sequence tokens (`<|im_end|>`, `<｜end▁of▁sentence｜>`) matches a wider
# class, so xgrammar would let the reply end there.
_FIRST_VISIBLE = "[ \\t\\n]*[!-;=-~\\u00a1-\\uffff]"


def json_element(schema: dict[str, Any]) -> dict[str, Any]:
    """A structural-tag element for one JSON value; whitespace bounded to one character in a
    row (xgrammar's least), so a model cannot loop on whitespace to max_tokens."""
    return {"type": "json_schema", "json_schema": schema, "max_whitespace_cnt": 1}


def think_instructions(instructions: str | None) -> str:
    """The system turn's instructions with StrictCall's prompted reasoning asked for."""
    return f"{instructions}\n\n{THINK_INSTRUCTIONS}" if instructions else THINK_INSTRUCTIONS


def budget_for(*, effort: Effort | None, tokens: int | None, default: int) -> int:
    """The reasoning budget in tokens (0: none): the request's explicit budget, else its
    `reasoning_effort`, else the server's default."""
    if tokens is not None:
        return tokens
    if effort is not None:
        return EFFORT_BUDGETS[effort]
    return default


def fitted(budget: int, *, max_tokens: int) -> int:
    """A budget the request did not give in tokens (the server's default, a
    `reasoning_effort`, a contract's), cut so that the answer keeps at least half of
    `max_tokens`, which counts the reasoning and the answer together (as OpenAI's, vLLM's,
    SGLang's and Anthropic's `max_tokens` do). 0: no room to reason."""
    return min(budget, max_tokens // 2)


def think_tag(*, begin: str, end: str, budget: int) -> dict[str, Any]:
    return {"type": "tag", "begin": begin,
            "content": {"type": "any_text", "max_tokens": budget}, "end": end}


def answer_element(answer: dict[str, Any] | None, *, end: str) -> dict[str, Any]:
    """The structural-tag element for the answer: `answer` (a format element), or free text
    that is not empty and does not write the reasoning's end marker again."""
    if answer is not None:
        return answer
    return {"type": "sequence", "elements": [{"type": "regex", "pattern": _FIRST_VISIBLE},
                                             {"type": "any_text", "excludes": [end]}]}


def reasoned(answer: dict[str, Any] | None, *, begin: str = "", end: str = THINK_END,
             then: str = "", budget: int) -> dict[str, Any]:
    """A structural tag: free reasoning (at most `budget` tokens) up to `end`, `then`, then
    the answer element (None: non-empty free text)."""
    elements = [think_tag(begin=begin, end=end, budget=budget)]
    if then:
        elements.append({"type": "const_string", "value": then})
    elements.append(answer_element(answer, end=end))
    return {"type": "structural_tag", "format": {"type": "sequence", "elements": elements}}


def with_budget(tag: dict[str, Any], *, begin: str, end: str, budget: int) -> dict[str, Any]:
    """`tag` (a family's structural tag, reasoning enabled) with its reasoning block capped
    at `budget` tokens. The block is the any_text tag that opens with `begin` and closes
    with `end`."""
    def visit(node: Any) -> bool:
        if isinstance(node, dict):
            if node.get("type") == "tag" and node["content"].get("type") == "any_text" \
                    and node["begin"] == begin \
                    and end in ([node["end"]] if isinstance(node["end"], str) else node["end"]):
                node["content"]["max_tokens"] = budget
                return True
            return any(visit(v) for v in node.values())
        if isinstance(node, list):
            return any(visit(v) for v in node)
        return False

    if not visit(tag):
        raise ValueError(f"no reasoning block closing with {end!r} in the structural tag")
    return tag
