"""The latency benchmark's workload: BFCL questions with their functions, asked four ways,
and each answer checked against the function's JSON Schema.

Kinds of request (the same question in each):
- forced: the question's functions as `tools`, `tool_choice` naming the expected function.
- auto: the same tools, `tool_choice` "auto" (StrictCall only: the peers' servers do not
  constrain an auto call for this model's template).
- json: the function's arguments as the answer, under `response_format` with the function's
  parameters schema; OpenAI's `json_schema` form, or llama.cpp's own
  `{"type": "json_object", "schema": ...}` (it answers OpenAI's form with a 500).
- free: the json kind's question with the schema written into the system turn and nothing
  constrained: the unconstrained baseline on the same question.

A wire dialect says how a server is asked: "strictcall" (every kind), "openai" (vLLM's own
server), "llamacpp" (llama-cpp-python's server) and "llama-server" (llama.cpp's C++ server)
take forced, json and free. "llama-server-compact" is llama.cpp's C++ server asked the json
kind with a GBNF `grammar` in place of the schema: the same grammar llama.cpp derives from the
schema, with its optional whitespace taken out, so that it writes the compact JSON StrictCall
writes and the two decodes are compared token for token.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bench.accuracy.bfcl_ast import EVALDATA, described, load, with_instructions
from bench.serve.validity import Answer, Expect, judge

Kind = Literal["forced", "auto", "json", "free"]
Dialect = Literal["strictcall", "openai", "llamacpp", "llama-server", "llama-server-compact"]
Outcome = Literal["valid", "invalid", "cut_off", "no_call", "unchecked", "error"]
KINDS: tuple[Kind, ...] = ("forced", "auto", "json", "free")
DIALECT_KINDS: dict[Dialect, frozenset[Kind]] = {
    "strictcall": frozenset(KINDS),
    "openai": frozenset({"forced", "json", "free"}),
    "llamacpp": frozenset({"forced", "json", "free"}),
    "llama-server": frozenset({"forced", "json", "free"}),
    "llama-server-compact": frozenset({"json"}),
}
# The dialects a deployed server is asked in (`strictcall-bench serve --target`): the compact
# one is the latency bench's own comparison, and needs llama-cpp-python's converter.
SERVED_DIALECTS: tuple[Dialect, ...] = ("strictcall", "openai", "llamacpp", "llama-server")
MODEL = "m"


@dataclass(frozen=True)
class Prompt:
    """One BFCL question: its turns, its functions (parameters as JSON Schema) and the
    function the gold answer calls."""

    id: str
    messages: tuple[dict[str, Any], ...]
    functions: tuple[dict[str, Any], ...]
    target: str

    @property
    def schema(self) -> dict[str, Any]:
        """The target function's parameters: what a json or free answer must match."""
        parameters: dict[str, Any] = self.function(self.target)["parameters"]
        return parameters

    def function(self, name: str) -> dict[str, Any]:
        return next(f for f in self.functions if f["name"] == name)

    def tools(self, dialect: Dialect) -> list[dict[str, Any]]:
        """The functions as `tools`; vLLM's server constrains a call's arguments only for
        a function marked `"strict": true` (unmarked, its named calls loop to max_tokens)."""
        mark = {"strict": True} if dialect == "openai" else {}
        return [{"type": "function", "function": {**f, **mark}} for f in self.functions]


def load_prompts(categories: list[str], limit: int, *, root: Path = EVALDATA
                 ) -> list[Prompt]:
    """The first `limit` questions over `categories` (BFCL's own order, taken in turn)."""
    per_category = [load(category, limit, root=root) for category in categories]
    prompts: list[Prompt] = []
    for i in range(limit):
        for pairs in per_category:
            if i < len(pairs) and len(prompts) < limit:
                question, answer = pairs[i]
                (target, _), = answer["ground_truth"][0].items()
                prompts.append(Prompt(id=question["id"],
                                      messages=tuple(question["question"][0]),
                                      functions=tuple(described(question["function"])),
                                      target=target))
    return prompts


def request_body(prompt: Prompt, kind: Kind, *, dialect: Dialect,
                 max_tokens: int) -> dict[str, Any] | None:
    """The streamed, greedy chat request for `prompt` in `kind`; None when the dialect's
    server is not asked this kind."""
    if kind not in DIALECT_KINDS[dialect]:
        return None
    return build_body(prompt, kind, dialect=dialect, max_tokens=max_tokens)


def build_body(prompt: Prompt, kind: Kind, *, dialect: Dialect,
               max_tokens: int) -> dict[str, Any]:
    """The request for `prompt` in `kind`, in `dialect`'s form, whether or not that
    dialect's server constrains it (`strictcall-bench serve` asks every target all kinds)."""
    body: dict[str, Any] = {"model": MODEL, "max_tokens": max_tokens, "temperature": 0,
                            "seed": 0, "stream": True,
                            "stream_options": {"include_usage": True}}
    if kind in ("forced", "auto"):
        body["messages"] = list(prompt.messages)
        body["tools"] = prompt.tools(dialect)
        body["tool_choice"] = "auto" if kind == "auto" else {
            "type": "function", "function": {"name": prompt.target}}
        if kind == "forced" and dialect == "llama-server":
            # llama-server reads a named tool_choice as "auto" (it takes only a string):
            # "required" over the named function alone is the forced call it can make (on
            # simple_python, whose questions offer one function, the same tools as others').
            body["tools"] = [t for t in body["tools"] if t["function"]["name"] == prompt.target]
            body["tool_choice"] = "required"
        return body
    body["messages"] = with_instructions(list(prompt.messages), _instructions(prompt, kind))
    if kind == "json" and dialect == "llama-server-compact":
        body["grammar"] = compact_grammar(prompt.schema)
    elif kind == "json":
        body["response_format"] = _response_format(prompt, dialect)
    return body


def _instructions(prompt: Prompt, kind: Kind) -> str:
    target = prompt.function(prompt.target)
    text = (f"Reply with the arguments for the function {target['name']!r} "
            f"({target['description']}) as one JSON object.")
    if kind == "free":  # nothing constrains it: the model needs the shape in words
        text += " It must match this JSON Schema: " + json.dumps(prompt.schema)
    return text


def _response_format(prompt: Prompt, dialect: Dialect) -> dict[str, Any]:
    if dialect == "llamacpp":
        return {"type": "json_object", "schema": prompt.schema}
    return {"type": "json_schema", "json_schema": {
        "name": "arguments", "schema": prompt.schema, "strict": True}}


def compact_grammar(schema: dict[str, Any]) -> str:
    """llama.cpp's GBNF for `schema` (llama-cpp-python's port of llama.cpp's
    json-schema-to-grammar) with no whitespace between tokens: its `space` rule, which every
    separator refers to, matches only the empty string. What llama-server then writes is the
    JSON StrictCall writes (`{"a":1,"b":"x"}`), so a token costs the same on both sides."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    rules = json_schema_to_gbnf(json.dumps(schema)).splitlines()
    spaced = [i for i, rule in enumerate(rules) if rule.startswith("space ::=")]
    if len(spaced) != 1:
        raise ValueError(f"the converter wrote {len(spaced)} space rules; expected one")
    rules[spaced[0]] = 'space ::= ""'
    return "\n".join(rules) + "\n"


def expect_for(prompt: Prompt, kind: Kind) -> Expect:
    """What the answer to `prompt` in `kind` must be: json, the target's parameters as the
    whole answer; free, the first JSON object in the text; forced, a call of the target;
    auto, any calls of the offered functions (no call at all: "no_call")."""
    if kind in ("json", "free"):
        return Expect(text_schema=prompt.schema, text_lenient=kind == "free")
    return Expect(functions={f["name"]: f["parameters"] for f in prompt.functions},
                  call="auto" if kind == "auto" else "required",
                  forced=prompt.target if kind == "forced" else None)


def check(prompt: Prompt, kind: Kind, answer: Answer) -> Outcome:
    """The answer's outcome (bench/serve/validity.py): a cut-off (finish_reason "length") is
    never valid, whatever its text."""
    return judge(expect_for(prompt, kind), answer)
