"""A model's `tokenizer.json`, served by the tokenizers library as transformers' generic
tokenizer class (TokenizersBackend) serves it, without importing transformers: that import
scans every model transformers knows, about half a second of a server's start, for a class
that only wraps this file. Chat templates are rendered by engines/chat_template.py.

Only where the directory says nothing this class would read differently: `from_dir` returns
None for anything else (a `tokenizer_config.json` key outside `UNDERSTOOD`, a special token
the file does not hold as such, cleanup of spaces on a non-BPE model, named templates in
files of their own), and the caller loads transformers' class (engines/tokenizer_files.py).
`tests/server/engines/test_json_tokenizer.py` holds it beside transformers' own on the
embedded model and other families' real tokenizers and templates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import tokenizers

from server.engines import chat_template

# transformers' named special tokens, in its order (all_special_tokens lists them so).
NAMED = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
         "mask_token")
# tokenizer_config.json keys this class reads as transformers does, or that change nothing
# it serves (lengths, padding sides, where the files came from; `legacy` and
# `sp_model_kwargs` are for a SentencePiece model, not a tokenizer.json: DeepSeek's has them).
UNDERSTOOD = frozenset({
    *NAMED, "backend", "tokenizer_class", "is_local", "local_files_only", "model_max_length",
    "padding_side", "truncation_side", "model_input_names", "name_or_path", "added_tokens_decoder",
    "additional_special_tokens", "extra_special_tokens", "chat_template",
    "clean_up_tokenization_spaces", "errors", "processor_class", "legacy", "sp_model_kwargs"})


class JsonTokenizer:
    """What the engines, grammar backends and formats use of a tokenizer: encode, decode,
    the vocabulary, special tokens, the chat template."""

    bos_token: str | None
    eos_token: str | None
    unk_token: str | None
    pad_token: str | None
    bos_token_id: int | None
    eos_token_id: int | None
    unk_token_id: int | None
    pad_token_id: int | None

    def __init__(self, backend: tokenizers.Tokenizer, *, special: dict[str, str],
                 extra_special: list[str], template: str | dict[str, str] | None) -> None:
        self.backend_tokenizer = backend
        self.special_tokens_map = special
        self.chat_template = template
        self.all_special_tokens = list(dict.fromkeys([*special.values(), *extra_special]))
        self.all_special_ids = [self._id(token) for token in self.all_special_tokens]
        self._vocab: dict[str, int] | None = None
        for name in NAMED:  # eos_token, eos_token_id, ...: None where the model has none
            setattr(self, name, special.get(name))
            setattr(self, f"{name}_id", self._id(special[name]) if name in special else None)

    @classmethod
    def from_dir(cls, model_dir: Path) -> JsonTokenizer | None:
        """The directory's tokenizer, or None where transformers' class would read it
        differently from this one (module doc)."""
        config = json_file(model_dir / "tokenizer_config.json")
        if not set(config) <= UNDERSTOOD or (model_dir / "chat_template.json").exists() \
                or (model_dir / "additional_chat_templates").exists():
            return None
        backend = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        if config.get("clean_up_tokenization_spaces") and \
                type(backend.model).__name__ != "BPE":  # transformers cleans up, except for BPE
            return None
        special = {name: _content(config[name]) for name in NAMED if config.get(name)}
        extra = [_content(t) for t in (config.get("extra_special_tokens")
                                       or config.get("additional_special_tokens") or [])]
        if isinstance(config.get("extra_special_tokens"), dict):  # named extras
            return None
        if not _held_as_special(backend, config, [*special.values(), *extra]):
            return None
        template_file = model_dir / "chat_template.jinja"
        template = template_file.read_text(encoding="utf-8") if template_file.is_file() \
            else _templates(config.get("chat_template"))
        return cls(backend, special=special, extra_special=extra, template=template)

    # -- transformers' names for what it does ------------------------------------------------
    def __len__(self) -> int:
        return int(self.backend_tokenizer.get_vocab_size(with_added_tokens=True))

    def get_vocab(self) -> dict[str, int]:
        # Read once (three readers at start-up, each about 20 ms holding the GIL); a copy
        # each time, as transformers gives.
        if self._vocab is None:
            self._vocab = dict(self.backend_tokenizer.get_vocab(with_added_tokens=True))
        return dict(self._vocab)

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return list(self.backend_tokenizer.encode(text, add_special_tokens=add_special_tokens).ids)

    def decode(self, token_ids: Any, skip_special_tokens: bool = False) -> str:
        ids = [token_ids] if isinstance(token_ids, int) else list(token_ids)
        return str(self.backend_tokenizer.decode(ids, skip_special_tokens=skip_special_tokens))

    def batch_decode(self, sequences: list[list[int]], skip_special_tokens: bool = False
                     ) -> list[str]:
        return [str(text) for text in self.backend_tokenizer.decode_batch(
            [list(ids) for ids in sequences], skip_special_tokens=skip_special_tokens)]

    def convert_tokens_to_ids(self, tokens: str | list[str]) -> int | None | list[int | None]:
        if isinstance(tokens, str):
            return self._id(tokens)
        return [self._id(token) for token in tokens]

    def apply_chat_template(self, conversation: list[dict[str, Any]], *,
                            tools: list[dict[str, Any]] | None = None, tokenize: bool = True,
                            add_generation_prompt: bool = False, **kwargs: Any
                            ) -> str | list[int]:
        text = chat_template.render(self._template(tools), conversation, tools=tools,
                                    add_generation_prompt=add_generation_prompt,
                                    special_tokens=self.special_tokens_map, **kwargs)
        return self.encode(text, add_special_tokens=False) if tokenize else text

    def _template(self, tools: list[dict[str, Any]] | None) -> str:
        template = self.chat_template
        if isinstance(template, dict):  # named templates: "tool_use" where tools are given
            name = "tool_use" if tools is not None and "tool_use" in template else "default"
            if name not in template:
                raise ValueError("this tokenizer has named chat templates and none is "
                                 f"'default': {sorted(template)}")
            return template[name]
        if template is None:
            raise ValueError("this tokenizer has no chat template; give the model one "
                             "(chat_template.jinja, or --chat-template FILE)")
        return template

    def _id(self, token: str) -> int | None:
        found = self.backend_tokenizer.token_to_id(token)
        return None if found is None else int(found)


def _content(token: Any) -> str:
    """A special token as tokenizer_config.json gives it: a string, or an AddedToken's dict."""
    return str(token["content"] if isinstance(token, dict) else token)


def _held_as_special(backend: tokenizers.Tokenizer, config: dict[str, Any],
                     named: list[str]) -> bool:
    """Whether tokenizer.json already holds each special token of the config as transformers
    would add it: the added tokens at their ids with their `special` flag, the named ones as
    special tokens."""
    held = {int(i): t for i, t in backend.get_added_tokens_decoder().items()}
    for token_id, token in (config.get("added_tokens_decoder") or {}).items():
        mine = held.get(int(token_id))
        if mine is None or mine.content != token.get("content") \
                or bool(mine.special) != bool(token.get("special")):
            return False
    special = {t.content for t in held.values() if t.special}
    return all(token in special for token in named)


def _templates(value: Any) -> str | dict[str, str] | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):  # [{"name": ..., "template": ...}]
        return {str(t["name"]): str(t["template"]) for t in value}
    raise ValueError(f"chat_template in tokenizer_config.json is a {type(value).__name__}")


def json_file(path: Path) -> dict[str, Any]:
    """A JSON object file's contents; {} where it is missing, unreadable or not an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
