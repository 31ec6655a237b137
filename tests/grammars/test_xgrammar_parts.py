"""xgrammar's parts loaded without torch (grammars/xgrammar_parts.py): its C++ matcher, built
past the torch-importing `GrammarMatcher` class, behaves as that class does; a process
where torch cannot be imported compiles, masks and serves structural tags with them; and
code that imports xgrammar as usual after them gets the whole package."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import xgrammar

from grammars import xgrammar_parts
from server.process import ROOT

SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                           "days": {"type": "integer"}},
          "required": ["city", "days"]}


def _masks(matcher, tokens, vocab_size, fill, accept):
    """The allowed token ids before each of `tokens` and after the last, and the forced
    tokens at each point, accepting each token."""
    bitmask = np.full((1, (vocab_size + 31) // 32), -1, dtype=np.int32)
    seen = []
    for token in [*tokens, None]:
        fill(matcher, bitmask)
        bits = np.unpackbits(bitmask[0].view(np.uint8), bitorder="little")[:vocab_size]
        seen.append((np.flatnonzero(bits).tolist(), list(matcher.find_jump_forward_tokens())))
        if token is not None:
            assert accept(matcher, token)
    return seen


def test_the_parts_matcher_is_xgrammars_matcher(tokenizer):
    info = xgrammar_parts.TokenizerInfo.from_huggingface(
        tokenizer, vocab_size=len(tokenizer), stop_token_ids=[tokenizer.eos_token_id])
    compiled = xgrammar_parts.GrammarCompiler(info, max_threads=1).compile_json_schema(
        json.dumps(SCHEMA), any_whitespace=False, separators=(",", ":"))
    tokens = tokenizer.encode('{"city":"Oslo","days":3}', add_special_tokens=False)
    ours = _masks(xgrammar_parts.new_matcher(compiled), tokens, len(tokenizer),
                  lambda m, b: m.fill_next_token_bitmask(b, 0, False),
                  lambda m, t: m.accept_token(t, False))
    theirs = _masks(xgrammar.GrammarMatcher(compiled), tokens, len(tokenizer),
                    lambda m, b: m.fill_next_token_bitmask(b, 0),
                    lambda m, t: m.accept_token(t))
    assert ours == theirs
    assert ours[-1][0] == [tokenizer.eos_token_id]  # the value is complete: only the end
    done = xgrammar_parts.new_matcher(compiled)
    for token in [*tokens, tokenizer.eos_token_id]:
        assert done.accept_token(token, False)
    assert done.is_terminated()
    whole = xgrammar_parts.new_matcher(compiled, terminate_without_stop_token=True)
    assert whole.accept_string('{"city":"Oslo","days":3}', False) and whole.is_completed()


CHILD = r'''
import json, sys
sys.modules["torch"] = None  # importing it now raises ImportError
import numpy as np
from transformers import AutoTokenizer
from grammars import JsonSchemaSpec, get_model_structural_tag, make_backend
from grammars.keywords import XGRAMMAR_KEYWORDS

tokenizer = AutoTokenizer.from_pretrained(sys.argv[1])
backend = make_backend("xgrammar", tokenizer, vocab_size=len(tokenizer),
                       stop_token_ids=[tokenizer.eos_token_id])
spec = JsonSchemaSpec.from_schema(json.loads(sys.argv[2]), table=XGRAMMAR_KEYWORDS)
matcher = backend.matcher(backend.compile(spec))
bitmask = backend.allocate_bitmask(1)
logits = np.zeros((1, backend.vocab_size), dtype=np.float32)
matcher.fill_bitmask(bitmask, 0)
backend.apply_bitmask(logits, bitmask, [0])
first = [tokenizer.decode([int(i)]) for i in np.flatnonzero(np.isfinite(logits[0]))]
tag = get_model_structural_tag("qwen_3", tools=[], tool_choice="auto", reasoning="disabled",
                               parallel_tool_calls=False)
print(json.dumps({"first": first, "tag": type(tag).__name__,
                  "torch": sys.modules.get("torch") is not None}))
'''


def test_a_process_without_torch_compiles_and_masks(model_dir):
    done = subprocess.run([sys.executable, "-c", CHILD, str(model_dir), json.dumps(SCHEMA)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["first"] and all(text.startswith("{") for text in out["first"])
    assert out["tag"] == "StructuralTag" and out["torch"] is False


FULL_AFTER_PARTS = r'''
import sys
from grammars import xgrammar_parts
import xgrammar
from xgrammar import allocate_token_bitmask
print(xgrammar.GrammarMatcher.__name__, allocate_token_bitmask(1, 64).shape[1],
      xgrammar.CompiledGrammar is xgrammar_parts.CompiledGrammar)
'''


def test_the_whole_package_loads_after_the_parts():
    done = subprocess.run([sys.executable, "-c", FULL_AFTER_PARTS], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["GrammarMatcher", "2", "True"]


WITHOUT_TRANSFORMERS = r'''
import json, sys
from server.engines.json_tokenizer import JsonTokenizer
from grammars import JsonSchemaSpec, make_backend
from grammars.keywords import XGRAMMAR_KEYWORDS
from pathlib import Path

tokenizer = JsonTokenizer.from_dir(Path(sys.argv[1]))
backend = make_backend("xgrammar", tokenizer, vocab_size=len(tokenizer),
                       stop_token_ids=[tokenizer.eos_token_id])
spec = JsonSchemaSpec.from_schema(json.loads(sys.argv[2]), table=XGRAMMAR_KEYWORDS)
matcher = backend.matcher(backend.compile(spec))
before = "transformers" in sys.modules
from transformers import AutoTokenizer  # the real one, after xgrammar's stand-in
from xgrammar import TokenizerInfo
theirs = AutoTokenizer.from_pretrained(sys.argv[1])
info = TokenizerInfo.from_huggingface(theirs, vocab_size=len(theirs),
                                      stop_token_ids=[theirs.eos_token_id])
print(json.dumps({"transformers_before": before, "vocab_type": str(info.vocab_type)}))
'''


def test_the_parts_load_without_transformers_and_leave_the_real_one_importable(model_dir):
    """xgrammar's tokenizer_info imports transformers' tokenizer classes at its top: the parts
    import it against a stand-in, so a llama.cpp server never imports transformers; a later
    import gets the real package, whose tokenizers xgrammar's own `from_huggingface` takes."""
    done = subprocess.run([sys.executable, "-c", WITHOUT_TRANSFORMERS, str(model_dir),
                           json.dumps(SCHEMA)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == {"transformers_before": False, "vocab_type": "VocabType.BYTE_LEVEL"}
