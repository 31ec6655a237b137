"""A model directory's tokenizer and end-of-sequence ids, loaded without importing the
model's own transformers classes.

`AutoTokenizer.from_pretrained(dir)` first builds the model's config class (`LlamaConfig`,
...) to learn its `model_type`, and importing those classes imports transformers' model
loading: torch.distributed, sympy and accelerate, about 50 MiB of resident memory that no
engine here uses (`strictcall-bench memory` measures the process). Where the tokenizer's own
`tokenizer_config.json` names its class and asks for no remote code, the model config only
contributes its `model_type` and name (transformers' special cases for some hubs' tokenizer
classes), so a generic config carrying those two gives the same tokenizer. Anything else
goes through AutoTokenizer unchanged.

A tokenizer whose class is transformers' generic one over tokenizer.json (TokenizersBackend,
PreTrainedTokenizerFast before transformers 5; the embedded model's) is served without
transformers (engines/json_tokenizer.py), where its files say nothing that class would read
differently; else it is built by that class directly: importing transformers builds its
import structure over every model it knows, about half a second of start-up.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from server.engines.json_tokenizer import JsonTokenizer, json_file

# The generic class over tokenizer.json: AutoTokenizer would give this one class.
GENERIC = ("TokenizersBackend", "PreTrainedTokenizerFast")


def load_tokenizer(model_dir: str | Path) -> Any:
    model_dir = Path(model_dir)
    declared = json_file(model_dir / "tokenizer_config.json")
    if declared.get("tokenizer_class") in GENERIC and "auto_map" not in declared \
            and (model_dir / "tokenizer.json").is_file():
        own = JsonTokenizer.from_dir(model_dir)
        if own is not None:
            return own
        from transformers import PreTrainedTokenizerFast

        return PreTrainedTokenizerFast.from_pretrained(model_dir)
    from transformers import AutoTokenizer

    if not declared.get("tokenizer_class") or "auto_map" in declared:
        return AutoTokenizer.from_pretrained(model_dir)
    from transformers import PreTrainedConfig

    config = PreTrainedConfig()
    # A class variable of transformers' configs, which AutoTokenizer reads off the instance.
    setattr(config, "model_type",  # noqa: B010 (mypy refuses the plain assignment)
            str(json_file(model_dir / "config.json").get("model_type") or ""))
    config._name_or_path = str(model_dir)
    return AutoTokenizer.from_pretrained(model_dir, config=config)


def config_eos_ids(model_dir: str | Path) -> set[int]:
    """The EOS ids generation_config.json and config.json give (a composite model's config
    gives them in its `text_config`)."""
    model_dir = Path(model_dir)
    ids: set[int] = set()
    for name in ("generation_config.json", "config.json"):
        data = json_file(model_dir / name)
        value = data.get("eos_token_id")
        if value is None and isinstance(data.get("text_config"), dict):
            value = data["text_config"].get("eos_token_id")
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, list):
            ids.update(v for v in value if isinstance(v, int))
    return ids
