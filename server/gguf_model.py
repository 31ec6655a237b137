"""A GGUF file as a model: `--model PATH.gguf`, or a directory holding only a GGUF. The file
carries the tokenizer, its special tokens and (usually) the chat template; transformers
reads them out of it (`gguf_file=`) into a small model directory of its own in the cache,
the tokenizer files and config.json (its model_type from the file's architecture, which
format detection reads) next to a link to the GGUF, so that every part
that takes a model directory (the llama.cpp engine, the EOS rules, format detection) takes
this one. Built once per file (the tokenizer of a 262k vocabulary takes ~20 s), checked
first: a file with no chat template gets its family's (shipped in server/templates) where its
architecture and vocabulary are one's here, with a log line saying which; otherwise, or with
a vocabulary xgrammar cannot use, it is refused in one line that says what is missing."""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, BinaryIO

# tokenizer.ggml.model values transformers can rebuild as a tokenizer xgrammar reads:
# SentencePiece with byte fallback, and byte-level BPE.
VOCABULARIES = {"llama": "SentencePiece", "gpt2": "byte-level BPE"}
# Tokens that end an assistant turn where a chat template writes them (llama.cpp's
# end-of-generation list): a base model's GGUF names only <eos>.
TURN_ENDS = ("<end_of_turn>", "<|im_end|>", "<|eot_id|>", "<|end|>", "<turn|>",
             "<|end_of_text|>", "<｜end▁of▁sentence｜>")
_STAMP = ".strictcall-gguf"
# Where a GGUF without a template got one of the families' below: the family's name.
_FAMILY_TEMPLATE = ".strictcall-family-template"


@dataclass(frozen=True)
class FamilyTemplate:
    """A chat template shipped here (server/templates), for a GGUF without one whose
    architecture and vocabulary are this family's (a base model's GGUF often carries none;
    llama.cpp's server and Ollama fall back to one per family too)."""

    name: str
    architectures: tuple[str, ...]
    markers: tuple[str, ...]  # the template's special tokens: all in the vocabulary
    file: str

    def text(self) -> str:
        return (resources.files("server") / "templates" / self.file).read_text()


FAMILY_TEMPLATES = (
    # Gemma 3 IT's template (as Unsloth ships it, Apache 2.0).
    FamilyTemplate("Gemma 3", ("gemma3",), ("<start_of_turn>", "<end_of_turn>"), "gemma3.jinja"),
    # ChatML as SmolLM2-Instruct writes it (Apache 2.0).
    FamilyTemplate("ChatML (SmolLM2)", ("llama",), ("<|im_start|>", "<|im_end|>"),
                   "chatml.jinja"),
)
_LAYOUT = 3  # what a built directory holds: a new layout builds anew


class GgufModelError(Exception):
    """A GGUF file that cannot be served as it is (one line: what is missing, what to do)."""


def gguf_file(path: Path) -> Path | None:
    """The GGUF `--model` names: the file itself, or a directory's only file when it holds
    a GGUF and no Hugging Face model (no config.json)."""
    if path.is_file() and path.suffix == ".gguf":
        return path
    if path.is_dir() and not (path / "config.json").is_file():
        files = sorted(path.glob("*.gguf"))
        if len(files) > 1:
            raise GgufModelError(f"{str(path)!r} holds {len(files)} GGUF files; pass one of "
                                 "them as --model")
        return files[0] if files else None
    return None


def prepare(gguf: Path, cache_dir: Path, *, chat_template: Path | None = None) -> Path:
    """The model directory for `gguf` (built on first use, then reused)."""
    template = chat_template.read_text() if chat_template is not None else None
    key = _key(gguf, template)
    target = cache_dir / "gguf" / key / gguf.stem
    if (target / _STAMP).is_file():
        return target
    meta = metadata(gguf, ("tokenizer.ggml.model", "tokenizer.chat_template",
                           "tokenizer.ggml.eot_token_id", "general.architecture"))
    family = None
    if template is None and not meta.get("tokenizer.chat_template"):
        family = family_template(gguf, meta)
        template = family.text() if family is not None else None
    check(gguf, meta, has_template=template is not None)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as tmp:
        staged = Path(tmp) / gguf.stem
        _build(gguf, staged, template=template, meta=meta)
        if family is not None:
            (staged / _FAMILY_TEMPLATE).write_text(family.name)
        if target.exists():
            shutil.rmtree(target)
        staged.rename(target)  # whole or not at all: an interrupted build leaves nothing
    return target


def family_template(gguf: Path, meta: dict[str, Any]) -> FamilyTemplate | None:
    """The shipped template of the family whose architecture and vocabulary `gguf` has."""
    fitting = [f for f in FAMILY_TEMPLATES
               if meta.get("general.architecture") in f.architectures]
    if not fitting:
        return None
    vocabulary = set(metadata(gguf, ("tokenizer.ggml.tokens",)).get("tokenizer.ggml.tokens")
                     or ())
    return next((f for f in fitting if vocabulary.issuperset(f.markers)), None)


def applied_family_template(model_dir: Path) -> str | None:
    """The family whose shipped template a model directory built from a GGUF got, if any."""
    path = model_dir / _FAMILY_TEMPLATE
    return path.read_text() if path.is_file() else None


def check(gguf: Path, meta: dict[str, Any], *, has_template: bool) -> None:
    vocabulary = meta.get("tokenizer.ggml.model")
    if vocabulary not in VOCABULARIES:
        kinds = ", ".join(f"{k} ({v})" for k, v in VOCABULARIES.items())
        raise GgufModelError(f"{gguf.name!r} has a {vocabulary or 'missing'!r} vocabulary "
                             f"(tokenizer.ggml.model), which xgrammar cannot use; GGUF "
                             f"vocabularies served: {kinds}")
    if not has_template and not meta.get("tokenizer.chat_template"):
        known = ", ".join(f.name for f in FAMILY_TEMPLATES)
        raise GgufModelError(f"{gguf.name!r} has no chat template (tokenizer.chat_template, "
                             "as a base model's GGUF may not) and is of no family with a "
                             f"template here ({known}); pass --chat-template FILE with the "
                             "model family's Jinja template")


def _build(gguf: Path, out: Path, *, template: str | None, meta: dict[str, Any]) -> None:
    from transformers import AutoConfig, AutoTokenizer

    out.mkdir(parents=True)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # transformers reads the vocabulary from the file but not its chat template.
    tokenizer.chat_template = template if template is not None \
        else meta["tokenizer.chat_template"]
    tokenizer.save_pretrained(out)
    config = AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name)
    config.save_pretrained(out)
    ends = sorted(set(_ids(config.eos_token_id)) | set(_turn_ends(tokenizer))
                  | set(_ids(meta.get("tokenizer.ggml.eot_token_id"))))
    (out / "generation_config.json").write_text(json.dumps({"eos_token_id": ends}))
    (out / gguf.name).symlink_to(gguf.resolve())
    (out / _STAMP).write_text(str(gguf.resolve()))


def _turn_ends(tokenizer: Any) -> Iterable[int]:
    """The turn-end tokens its chat template writes (Gemma's <end_of_turn>)."""
    template = tokenizer.chat_template if isinstance(tokenizer.chat_template, str) else ""
    vocab = tokenizer.get_vocab()
    return (vocab[t] for t in TURN_ENDS if t in template and t in vocab)


def _ids(value: Any) -> list[int]:
    if isinstance(value, int):
        return [value]
    return [v for v in value if isinstance(v, int)] if isinstance(value, list) else []


def _key(gguf: Path, template: str | None) -> str:
    """The file (where it is, its size and time) and the template given with it."""
    stat = gguf.stat()
    text = f"{_LAYOUT}\0{gguf.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}\0{template or ''}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# -- the GGUF header: its key-value metadata, arrays skipped ---------------------------
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
            10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


def metadata(gguf: Path, keys: Iterable[str]) -> dict[str, Any]:
    """The values of `keys` in `gguf`'s header (a few milliseconds: arrays, the vocabulary
    among them, are skipped rather than read)."""
    wanted = set(keys)
    out: dict[str, Any] = {}
    with gguf.open("rb") as f:
        if f.read(4) != b"GGUF":
            raise GgufModelError(f"{gguf.name!r} is not a GGUF file (no GGUF magic)")
        version, _tensors, count = struct.unpack("<IQQ", f.read(20))
        if version < 2:
            raise GgufModelError(f"{gguf.name!r} is GGUF version {version}; re-convert it "
                                 "with a current llama.cpp")
        for _ in range(count):
            key = _string(f)
            kind = struct.unpack("<I", f.read(4))[0]
            value = _value(f, kind, keep=key in wanted)
            if key in wanted:
                out[key] = value
    return out


def _value(f: BinaryIO, kind: int, *, keep: bool) -> Any:
    if kind in _SCALARS:
        fmt = _SCALARS[kind]
        return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]
    if kind == _STRING:
        return _string(f)
    if kind == _ARRAY:
        item, length = struct.unpack("<IQ", f.read(12))
        if item in _SCALARS and not keep:
            f.seek(length * struct.calcsize(_SCALARS[item]), 1)
            return None
        values = [_value(f, item, keep=keep) for _ in range(length)]
        return values if keep else None
    raise GgufModelError(f"unknown GGUF value type {kind}")


def _string(f: BinaryIO) -> str:
    (length,) = struct.unpack("<Q", f.read(8))
    return f.read(length).decode("utf-8", errors="replace")
