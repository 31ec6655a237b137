"""What `strictcall-bench serve` sends: work items from the shipped workloads, a user's
JSONL (bench/serve/userfile.py) or the synthetic generator, each a request body in one API
and what its answer must be.

Shipped workloads:
- bfcl-forced, bfcl-auto, bfcl-json, bfcl-free: BFCL questions (read in place from
  `--bfcl-dir`, by default ../shared/evaldata/bfcl beside the checkout) asked as the latency
  bench asks them (bench/speed/latency_workload.py): a named tool call, an auto tool call, the
  arguments as a json_schema answer, and that answer unconstrained (the schema in words).
- contracts: the contract scenarios (contracts/scenarios/*.yaml), each user turn with the
  example contracts' tools offered (auto), their headers sent along.
- synthetic-text, synthetic-tool, synthetic-json: prompts of about `--input-len` words
  (roughly as many tokens; the servers' usage says exactly) asking for `--output-len`
  tokens of text, a forced tool call after the long context (what agents send), or a JSON
  answer under a schema.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path
from typing import Any

from bench.accuracy.bfcl_ast import EVALDATA
from bench.serve.validity import Api, Expect
from bench.speed.latency_workload import (
    SERVED_DIALECTS,
    Dialect,
    Kind,
    Prompt,
    build_body,
    expect_for,
    load_prompts,
)

BFCL_KINDS: dict[str, Kind] = {"bfcl-forced": "forced", "bfcl-auto": "auto",
                               "bfcl-json": "json", "bfcl-free": "free"}
SYNTHETIC = ("synthetic-text", "synthetic-tool", "synthetic-json")
SHIPPED = (*BFCL_KINDS, "contracts", *SYNTHETIC)
SCENARIOS = Path(__file__).resolve().parents[2] / "contracts" / "scenarios"
_MAX_TOKENS_KEY: dict[Api, str] = {"chat": "max_tokens", "responses": "max_output_tokens",
                                   "messages": "max_tokens"}


@dataclass(frozen=True)
class WorkItem:
    """One request of a workload. `body` is sent as it is (the model and streaming set per
    target); `by_dialect` holds the shipped workloads' bodies for the other dialects."""

    id: str
    workload: str
    api: Api
    body: dict[str, Any]
    expect: Expect = field(default_factory=Expect)
    by_dialect: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)

    def request(self, *, model: str, dialect: Dialect, max_tokens: int | None = None,
                extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The body for one target: `extra` merged in (`--extra-body`), its model, streamed
        (chat: with usage), and `max_tokens` in the API's own field where given."""
        body = {**self.by_dialect.get(dialect, self.body), **(extra or {}), "model": model,
                "stream": True}
        if self.api == "chat":
            body["stream_options"] = {**(body.get("stream_options") or {}),
                                      "include_usage": True}
        if max_tokens is not None:
            key = "max_completion_tokens" if "max_completion_tokens" in body \
                else _MAX_TOKENS_KEY[self.api]
            body[key] = max_tokens
        return body

    def recorded(self) -> dict[str, Any]:
        return {"id": self.id, "workload": self.workload, "api": self.api, "body": self.body,
                "by_dialect": dict(self.by_dialect), "headers": dict(self.headers)}


@dataclass(frozen=True)
class Sources:
    """Where the shipped workloads come from, and their sizes."""

    bfcl_dir: Path = EVALDATA
    bfcl_categories: tuple[str, ...] = ("simple_python",)
    bfcl_limit: int = 16
    scenarios_dir: Path = SCENARIOS
    contracts_module: str = "contracts.examples"
    max_tokens: int = 128
    input_len: int = 256
    output_len: int = 64
    synthetic_count: int = 16
    seed: int = 0


def shipped(name: str, sources: Sources) -> list[WorkItem]:
    if name in BFCL_KINDS:
        kind = BFCL_KINDS[name]
        prompts = load_prompts(list(sources.bfcl_categories), sources.bfcl_limit,
                               root=sources.bfcl_dir)
        return [_prompt_item(p, kind, name, sources.max_tokens) for p in prompts]
    if name == "contracts":
        return contract_items(sources)
    if name in SYNTHETIC:
        return synthetic(name, sources)
    raise ValueError(f"unknown workload {name!r}; use one of {', '.join(SHIPPED)} or a "
                     ".jsonl file of your own requests")


def _prompt_item(prompt: Prompt, kind: Kind, workload: str, max_tokens: int,
                 headers: Mapping[str, str] | None = None) -> WorkItem:
    bodies = {d: build_body(prompt, kind, dialect=d, max_tokens=max_tokens)
              for d in SERVED_DIALECTS}
    return WorkItem(id=prompt.id, workload=workload, api="chat", body=bodies["openai"],
                    expect=expect_for(prompt, kind),
                    by_dialect={d: b for d, b in bodies.items() if d != "openai"},
                    headers=headers or {})


def contract_items(sources: Sources) -> list[WorkItem]:
    """The scenarios' user turns with their files' tools offered (auto tool choice)."""
    from contracts import ContractRegistry  # pydantic models: only when asked for
    from server.eval.scenarios import load

    registry = ContractRegistry()
    registry.load(sources.contracts_module)
    files = sorted(sources.scenarios_dir.glob("*.yaml")) + \
        sorted(sources.scenarios_dir.glob("*.jsonl"))
    if not files:
        raise ValueError(f"no scenario files (*.yaml, *.jsonl) in {sources.scenarios_dir}")
    items = []
    for path in files:
        spec = load(path)
        functions = tuple(_function(registry, name, path) for name in spec.tools)
        for case in spec.scenarios:
            prompt = Prompt(id=case.id, messages=({"role": "user", "content": case.user},),
                            functions=functions, target=case.expect.tool or spec.tool)
            items.append(_prompt_item(prompt, "auto", "contracts", sources.max_tokens,
                                      spec.headers))
    return items


def _function(registry: Any, name: str, path: Path) -> dict[str, Any]:
    contract = registry.get(name)
    if contract is None:
        raise ValueError(f"{path}: tool {name!r} is not among the contracts' tools "
                         f"({', '.join(registry.names())})")
    return {"name": name, "description": contract.description, "parameters": contract.schema()}


# Short, common words: about one token each in the usual BPE vocabularies.
_WORDS = [
    "the", "of", "and", "to", "in", "is", "was", "for", "on", "are", "with", "as", "at", "be",
    "by", "this", "had", "not", "but", "from", "or", "have", "an", "they", "which", "one",
    "you", "were", "her", "all", "she", "there", "would", "their", "we", "him", "been", "has",
    "when", "who", "will", "more", "no", "if", "out", "so", "said", "what", "up", "its",
    "about", "into", "than", "them", "can", "only", "other", "new", "some", "could", "time",
    "these", "two", "may", "then", "do", "first", "any", "my", "now", "such", "like", "our",
    "over", "man", "me", "even", "most", "made", "after", "also", "did", "many", "before",
    "must", "through", "back", "years", "where", "much", "your", "way", "well", "down",
    "should", "because", "each", "just", "those", "people", "how", "too", "little", "state",
    "good", "very", "make", "world", "still", "own", "see", "men", "work", "long", "get",
    "here", "between", "both", "life", "being", "under", "never", "day", "same", "another",
    "know", "while", "last", "might", "us", "great", "old", "year", "off", "come", "since",
    "against", "go", "came", "right", "used", "take", "three"
]
RECORD_TOOL: dict[str, Any] = {
    "name": "record_event", "description": "Record the event the notes describe.",
    "parameters": {"type": "object", "properties": {
        "title": {"type": "string", "maxLength": 60},
        "priority": {"enum": ["low", "normal", "high"]},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 20},
                 "maxItems": 3},
        "count": {"type": "integer", "minimum": 0, "maximum": 1000}},
        "required": ["title", "priority", "tags", "count"],
        "additionalProperties": False}}


def synthetic(name: str, sources: Sources) -> list[WorkItem]:
    """`synthetic_count` prompts of about `input_len` words of filler (different in each, so
    that no prefix cache serves them whole), `output_len` tokens asked for."""
    rng = random.Random(sources.seed)
    items = []
    for i in range(sources.synthetic_count):
        notes = " ".join(rng.choice(_WORDS) for _ in range(sources.input_len))
        item_id = f"{name}-{i}"
        if name == "synthetic-text":
            body = {"model": "", "max_tokens": sources.output_len, "temperature": 0,
                    "messages": [{"role": "user", "content": f"Notes: {notes}\n\nWrite a "
                                  "long story that uses the notes above."}]}
            items.append(WorkItem(id=item_id, workload=name, api="chat", body=body))
            continue
        prompt = Prompt(id=item_id, functions=(RECORD_TOOL,), target=RECORD_TOOL["name"],
                        messages=({"role": "user", "content": f"Notes: {notes}\n\nRecord "
                                   "the event these notes describe."},))
        kind: Kind = "forced" if name == "synthetic-tool" else "json"
        items.append(_prompt_item(prompt, kind, name, sources.output_len))
    return items


def mixed(workloads: list[list[WorkItem]]) -> list[WorkItem]:
    """The workloads' items taken in turn (one of each, then the next of each), so that a
    short run sends some of every workload."""
    return [item for group in zip_longest(*workloads) for item in group if item is not None]


def cycled(items: list[WorkItem]) -> Iterator[tuple[int, WorkItem]]:
    """(sequence number, item), the items over and over."""
    n = 0
    while True:
        for item in items:
            yield n, item
            n += 1


def workload_hash(items: list[WorkItem]) -> str:
    """sha256 of every item as sent (before a target's model is set): two runs with the same
    hash sent the same requests in the same order."""
    text = json.dumps([item.recorded() for item in items], sort_keys=True,
                      ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()
