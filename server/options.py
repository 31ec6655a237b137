"""The per-request options every API accepts (`strictcall` in the body; `extra_body=` with
the SDKs), and each option's set of values, defined once: the settings, the wire models,
the pipeline and the formats read them from here."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# Runaway guards (server/pipeline/guards/runaway.py): a value that repeats itself is stopped, or
# steered away from the repeat by engines that choose tokens themselves.
LoopGuard = Literal["off", "stop", "steer"]
# How a JSON answer's schema is written into the prompt (server/formats/schema_text.py).
SchemaPrompt = Literal["raw", "compact", "none"]
# How tools are written into the prompt for a required or forced call: JSON lines with their
# JSON Schema ("full"), a TypeScript-like argument shape ("compact"), or names and
# descriptions only ("none"). "auto": none for a call forced to a named tool, full where the
# model chooses (server/pipeline/plan.py; measured with bench/accuracy/bfcl.py).
ToolStyle = Literal["full", "compact", "none"]
ToolPrompt = Literal["auto", "full", "compact", "none"]
# tool_choice "auto": "decide" lets the model write an empty call list (then a second pass
# answers), "trigger" constrains a call once the model opens one (server/formats).
AutoTools = Literal["decide", "trigger"]
# tool_choice "auto" on the turn after a tool result (a call of this turn answered since the
# user's last message): "answer-first" starts in free text, the call grammar only behind the
# model's own call marker; "auto" serves it as the first turn (--auto-tools). Measured with
# bench/dialogue/agent_loop.py.
AfterResults = Literal["answer-first", "auto"]
# The reasoning pass's budget by name (server/formats/reasoning.py EFFORT_BUDGETS).
Effort = Literal["none", "minimal", "low", "medium", "high"]


class StrictCallOptions(BaseModel):
    """Per-request options, sent as `extra_body={"strictcall": {...}}` with the openai SDK
    (and the same object on the Responses and Messages APIs). Unset: the server's setting."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_repair_attempts: int | None = Field(None, ge=0, le=5)
    repair_timeout_s: float | None = Field(None, gt=0, le=120)
    # Runaway guards (server defaults: --dedupe-calls, --loop-guard).
    dedupe_calls: bool | None = None
    loop_guard: LoopGuard | None = None
    # How a JSON answer's schema is written into the prompt (server default: --schema-prompt).
    schema_prompt: SchemaPrompt | None = None
    # How tools are written into the prompt for a required or forced call (--tool-prompt).
    tool_prompt: ToolPrompt | None = None
    # The free-reasoning pass: at most this many tokens of free thinking before the answer
    # (0: none; server default: --reasoning). Wins over reasoning_effort.
    reasoning_budget: int | None = Field(None, ge=0, le=32768)
    # Tool selection: offer the tools of this registered catalog (the --policy file's
    # `catalogs`), and at most `select_k` tools when selecting (server default: --select-k).
    catalog: str | None = Field(None, min_length=1, max_length=64)
    select_k: int | None = Field(None, ge=1, le=64)
    # Grounded fields copied from the conversation (server default: --grounding). Off: the
    # model writes them like any other field (what `strictcall-bench grounding` compares).
    grounding: bool | None = None
    # Where the conversation gives a grounded field more than one value: "ask" names them
    # in a question, "model" lets the model pick one. Unset: ask for a write (a contract's
    # kind, a client schema's `x-strictcall-kind: "write"`), the model picks for the rest.
    ambiguity: Literal["ask", "model"] | None = None
    # A conversation whose tool arguments are collected across turns (server/sessions):
    # any id the client chooses, scoped by its tenant. On the Responses API a chain of
    # previous_response_id is one session by itself. `reset_slots`: forget what was
    # collected before this turn.
    session: str | None = Field(None, min_length=1, max_length=128,
                                pattern=r"^[A-Za-z0-9._:@-]+$")
    reset_slots: bool | None = None
