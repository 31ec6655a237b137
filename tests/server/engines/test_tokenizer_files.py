"""The tokenizer loaded without the model's own transformers classes serves what AutoTokenizer's
serves: the embedded model's without transformers at all (engines/json_tokenizer.py), one
whose files that class cannot read as transformers would through transformers' own generic
class, anything else through AutoTokenizer; loading it leaves transformers' model loading
(torch.distributed, sympy, accelerate) unimported. EOS ids come from the JSON files as
transformers' configs read them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

from transformers import AutoTokenizer

from server.engines.json_tokenizer import JsonTokenizer
from server.engines.tokenizer_files import config_eos_ids, load_tokenizer
from server.process import ROOT

MESSAGES = [{"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Łódź? <tool_call> {\"a\": 1} 日本"}]


def _same(ours, theirs):
    text = MESSAGES[1]["content"] + " <|im_end|>"
    assert ours.encode(text) == theirs.encode(text) and len(ours) == len(theirs)
    assert ours.all_special_ids == theirs.all_special_ids
    assert ours.apply_chat_template(MESSAGES, tokenize=False, add_generation_prompt=True) == \
        theirs.apply_chat_template(MESSAGES, tokenize=False, add_generation_prompt=True)


def test_the_embedded_models_tokenizer_serves_what_autotokenizers_does(model_dir):
    ours = load_tokenizer(model_dir)
    assert isinstance(ours, JsonTokenizer)
    _same(ours, AutoTokenizer.from_pretrained(model_dir))


def _loaded_in_a_child(model_dir, shown: str) -> str:
    """What a fresh Python prints of `shown` (an expression over `t`, the tokenizer, and
    `sys`) after loading the tokenizer: its last line."""
    child = ("import sys; from server.engines.tokenizer_files import load_tokenizer; "
             f"t = load_tokenizer({str(model_dir)!r}); print({shown})")
    done = subprocess.run([sys.executable, "-c", child], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=True)
    return done.stdout.strip().splitlines()[-1]


def test_the_embedded_models_tokenizer_is_served_without_importing_transformers(model_dir):
    assert _loaded_in_a_child(
        model_dir, "type(t).__name__, 'transformers' in sys.modules") \
        == "JsonTokenizer False"


def test_a_config_key_it_does_not_read_goes_to_transformers_generic_class(model_dir, tmp_path):
    """`split_special_tokens` changes how transformers encodes: a key JsonTokenizer does not
    read sends the directory to transformers' own generic class, without AutoTokenizer's
    import structure."""
    copy = tmp_path / "model"
    shutil.copytree(model_dir, copy, ignore=shutil.ignore_patterns("*.gguf", "*.safetensors"))
    declared = json.loads((copy / "tokenizer_config.json").read_text())
    (copy / "tokenizer_config.json").write_text(json.dumps(
        {**declared, "split_special_tokens": False}))
    assert _loaded_in_a_child(
        copy, "type(t).__name__, 'transformers.models.auto.tokenization_auto' in "
        "sys.modules") == "TokenizersBackend False"
    _same(load_tokenizer(copy), AutoTokenizer.from_pretrained(copy))


def test_a_tokenizer_that_names_no_class_goes_through_autotokenizer(model_dir, tmp_path):
    copy = tmp_path / "model"
    copy.mkdir()
    for name in ("tokenizer.json", "config.json", "chat_template.jinja"):
        if (model_dir / name).exists():
            shutil.copy(model_dir / name, copy / name)
    declared = json.loads((model_dir / "tokenizer_config.json").read_text())
    declared.pop("tokenizer_class")
    (copy / "tokenizer_config.json").write_text(json.dumps(declared))
    _same(load_tokenizer(copy), AutoTokenizer.from_pretrained(copy))


def test_loading_it_imports_none_of_transformers_model_loading(model_dir):
    assert _loaded_in_a_child(
        model_dir, "[m for m in ('sympy', 'accelerate', 'torch.distributed.tensor') "
        "if m in sys.modules]") == "[]"


def test_eos_ids_from_generation_config_model_config_and_text_config(tmp_path):
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [1, 106]}))
    (tmp_path / "config.json").write_text(json.dumps({"text_config": {"eos_token_id": 7}}))
    assert config_eos_ids(tmp_path) == {1, 106, 7}
    (tmp_path / "config.json").write_text("{not json")
    assert config_eos_ids(tmp_path) == {1, 106}
