"""What `--engine upstream` sends a vLLM server and reads back: `/v1/completions` with the
prompt as token ids, the grammar as vLLM's `structured_outputs`, streamed with the token ids
of each delta. Pure functions and the pass-through grammar backend; no I/O.

Whitespace: the embedded vLLM engine starts vLLM with `disable_any_whitespace`, so JSON
comes out compact. A server StrictCall does not start leaves JSON whitespace free unless its
operator set that flag, and vLLM takes it only from the server's config, not per request.
So by default ("bounded") a JSON schema goes as a structural tag whose JSON content allows
at most one whitespace character in a row, which bounds what a small model can waste;
"server" sends vLLM's plain `json` kind, for servers started with
`--structured-outputs-config '{"backend": "xgrammar", "disable_any_whitespace": true}'`."""

from __future__ import annotations

import functools
import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from grammars import (
    VLLM_XGRAMMAR_KEYWORDS,
    CompiledGrammar,
    GrammarBackend,
    GrammarSpec,
    TaggedSpec,
)
from server.engines import rules
from server.engines.base import SamplingParams
from server.engines.vllm_specs import structured_outputs

Whitespace = Literal["bounded", "server"]


@functools.lru_cache(maxsize=1024)
def upstream_structured_outputs(spec: GrammarSpec, whitespace: Whitespace) -> dict[str, str]:
    """The spec as vLLM's `structured_outputs` request field: the embedded vLLM engine's
    kinds (json, structural tag), JSON bounded in whitespace unless the server does it.
    Remembered per spec (read only), so a request does not re-serialize its schema."""
    if whitespace == "server" or isinstance(spec, TaggedSpec):
        return structured_outputs(spec)
    # xgrammar's structural-tag JSON content takes a whitespace bound (>= 1); its json kind
    # takes none per request.
    tag = {"type": "structural_tag", "format": {
        "type": "json_schema", "json_schema": spec.json_schema(), "max_whitespace_cnt": 1}}
    return {"structural_tag": json.dumps(tag, separators=(",", ":"))}


def completion_body(prompt_ids: Sequence[int], sampling: SamplingParams, *, model: str,
                    spec: GrammarSpec | None, whitespace: Whitespace,
                    extra_stop_ids: Sequence[int], skip_special_tokens: bool,
                    request_id: str) -> dict[str, Any]:
    """The `/v1/completions` body: what the embedded vLLM engine puts in its
    SamplingParams, as JSON."""
    body: dict[str, Any] = {
        "model": model, "prompt": list(prompt_ids), "max_tokens": sampling.max_tokens,
        "temperature": sampling.temperature, "top_p": sampling.top_p,
        "stop": list(rules.applied_stop_strings(sampling, constrained=spec is not None)),
        "stop_token_ids": list(extra_stop_ids), "skip_special_tokens": skip_special_tokens,
        "stream": True, "return_token_ids": True, "request_id": request_id}
    if sampling.seed is not None:
        body["seed"] = sampling.seed
    if spec is not None:
        body["structured_outputs"] = upstream_structured_outputs(spec, whitespace)
    return body


@dataclass(frozen=True)
class Delta:
    """One streamed chunk: its new tokens and text, and how it ended (on the last)."""

    token_ids: tuple[int, ...]
    text: str
    finish_reason: str | None
    stop_reason: int | str | None


class UpstreamError(Exception):
    """An error the upstream reported in its stream (`data: {"error": ...}`)."""


def read_event(line: str) -> Delta | None:
    """One SSE line of the stream: a `Delta`, or None (a blank line, a comment, [DONE]).
    Raises UpstreamError for an error event or a line that is not vLLM's (before the first
    token the request then moves to another upstream; after it, a 503: never a 500)."""
    if not line.startswith("data:"):
        return None
    data = line[len("data:"):].strip()
    if data == "[DONE]":
        return None
    try:
        return _delta(json.loads(data))
    except UpstreamError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:
        raise UpstreamError(f"a malformed stream line ({type(exc).__name__}: "
                            f"{str(exc)[:120]}): {data[:80]!r}") from None


def _delta(chunk: Any) -> Delta:
    if not isinstance(chunk, dict):
        raise ValueError("the event is not a JSON object")
    if "error" in chunk:
        error = chunk["error"]
        message = error.get("message") if isinstance(error, dict) else error
        raise UpstreamError(str(message)[:300])
    choices = chunk.get("choices") or []
    if not choices:  # a usage-only chunk
        return Delta((), "", None, None)
    choice = choices[0]
    ids = choice.get("token_ids")
    if ids is None:
        raise ValueError("the stream carries no token_ids: the upstream is not a vLLM "
                         "server that takes return_token_ids (vLLM >= 0.10.2)")
    text, finish = choice.get("text") or "", choice.get("finish_reason")
    if not isinstance(text, str) or not (finish is None or isinstance(finish, str)):
        raise ValueError("text or finish_reason is not a string")
    return Delta(tuple(int(t) for t in ids), text, finish, choice.get("stop_reason"))


def ended_on_eos(finish_reason: str | None, stop_reason: int | str | None) -> bool:
    """As the embedded vLLM engine reads it (vllm_engine._ended_on_eos)."""
    return finish_reason == "stop" and (stop_reason is None or isinstance(stop_reason, int))


def fingerprint(tokenizer: Any, stop_token_ids: Sequence[int]) -> str:
    """The tokenizer's identity for the grammar cache's keys, read from its vocabulary
    (grammars' own fingerprint needs xgrammar and torch, which this engine does without)."""
    vocab = sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])
    payload = json.dumps([vocab, len(tokenizer), sorted(stop_token_ids)], ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


class UpstreamGrammarBackend(GrammarBackend):
    """The upstream vLLM compiles and applies the masks, like the embedded vLLM engine's
    backend, with vLLM's xgrammar keyword table; but with no vLLM here to ask, `compile`
    checks nothing: a spec the upstream refuses comes back as its 400, which the engine
    turns into one of ours. Strict objects only; nothing to persist."""

    name = "vllm-xgrammar"
    keywords = VLLM_XGRAMMAR_KEYWORDS

    def __init__(self, tokenizer: Any, *, stop_token_ids: Sequence[int],
                 whitespace: Whitespace) -> None:
        self.version = "upstream vLLM (xgrammar)"
        self.whitespace = whitespace
        self.tokenizer_fingerprint = fingerprint(tokenizer, stop_token_ids)

    @property
    def options_key(self) -> str:
        return f"upstream:whitespace={self.whitespace}"

    def compile(self, spec: GrammarSpec) -> CompiledGrammar:
        start = time.perf_counter()
        upstream_structured_outputs(spec, self.whitespace)  # remembered, and fails early
        return CompiledGrammar(spec, None, time.perf_counter() - start)
