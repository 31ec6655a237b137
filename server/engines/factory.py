"""Settings -> engine, with configuration errors stated in one line."""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import threading
import urllib.parse
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import TypedDict

from grammars import BRIDGE
from server.engines.base import Engine
from server.engines.drafts import Speculation
from server.engines.memory import describe
from server.engines.scheduler import SchedulePolicy
from server.gguf_model import applied_family_template
from server.model_store import (
    ModelNotFoundError,
    default_cache_dir,
    is_gguf_model,
    is_model_name,
    resolve_model,
)
from server.settings import Settings

log = logging.getLogger("strictcall.engine")


class EngineConfigError(Exception):
    pass


class SteppedOptions(TypedDict):
    """What the engines that step the model themselves (engines/loop.py) take alike."""

    threads: int
    max_batch: int
    model_name: str
    grammar_backend: str
    step_timeout_s: float
    jump_forward: bool
    prefix_cache_bytes: int
    schedule: SchedulePolicy
    speculation: Speculation


def bridged(settings: Settings) -> bool:
    """Whether xgrammar's cold compiles are bridged by llguidance (--cold-compile)."""
    if settings.cold_compile == "auto":
        return settings.engine not in ("vllm", "upstream") \
            and settings.grammar_backend == "xgrammar"
    return settings.cold_compile == "bridge"


def resolve_engine(settings: Settings) -> str:
    """`--engine auto`: llama.cpp on a CPU host where it is installed and the model has a
    GGUF (the embedded one does), chosen by measurement (README, "Engines"); the torch
    engine otherwise (a CUDA GPU, or no llama.cpp). Sets and returns the concrete engine."""
    if settings.engine == "auto":
        from server.model_store import find_gguf

        cpu = settings.device == "cpu" or (settings.device == "auto" and not cuda_available())
        llamacpp = (cpu and importlib.util.find_spec("llama_cpp") is not None
                    and find_gguf(resolve_model(settings.model, settings.cache_dir,
                          chat_template=settings.chat_template)))
        settings.engine = "llamacpp" if llamacpp else "torch"
    return settings.engine


def cuda_available() -> bool:
    """`torch.cuda.is_available()`, without importing torch (about 200 MiB) on a Linux host
    with no NVIDIA driver loaded, where the answer is no."""
    if sys.platform == "linux" and not Path("/proc/driver/nvidia").exists():
        return False
    import torch

    return bool(torch.cuda.is_available())


def keep_torch_out(settings: Settings) -> bool:
    """A llama.cpp server never holds a torch tensor: its logits, masks and samples are numpy
    arrays. But libraries import torch wherever it is installed (tvm_ffi under xgrammar
    tries it first; transformers' config code does once it finds it), about 200 MiB of
    resident memory for nothing. For this process torch is made unimportable, Python's
    way (`sys.modules["torch"] = None`: an import raises ImportError), before the engine
    loads. Called once the engine is resolved; True if torch is kept out. `--no-torch-free`
    leaves it importable, for contracts and tool handlers that import it."""
    if not settings.torch_free or settings.engine != "llamacpp" \
            or sys.modules.get("torch") is not None:
        return False
    sys.modules["torch"] = None  # type: ignore[assignment]
    # transformers' advice, on import, that "PyTorch was not found": here it is by choice.
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    return True


def check_config(settings: Settings) -> None:
    """Cheap checks before anything heavy loads; also fetches the embedded model if needed."""
    if settings.engine == "upstream":  # no torch, vLLM or llama.cpp needed here
        _check_upstream(settings)
        return
    if settings.device.startswith("cuda") and not cuda_available():
        raise EngineConfigError(f"--device {settings.device} was asked for, but torch sees no "
                                "CUDA GPU; use --device cpu or auto")
    if settings.device not in ("auto", "cpu") and not settings.device.startswith("cuda"):
        raise EngineConfigError(f"unknown --device {settings.device!r}; use auto, cpu or cuda[:N]")
    try:
        resolve_model(settings.model, settings.cache_dir,
                          chat_template=settings.chat_template)
    except ModelNotFoundError as exc:
        raise EngineConfigError(str(exc)) from None
    if settings.served_model_name is None and is_model_name(settings.model):
        settings.served_model_name = settings.model  # served by the name it was asked by
    engine = resolve_engine(settings)
    if engine == "llamacpp":
        _check_llamacpp(settings)
    elif is_gguf_model(settings.model):
        raise EngineConfigError(f"--model {settings.model} is a GGUF file: --engine llamacpp "
                                "serves it (auto picks it on a CPU host with llama-cpp-python); "
                                f"--engine {engine} needs a Hugging Face model directory")
    if settings.engine == "vllm" and settings.grammar_backend != "xgrammar":
        raise EngineConfigError("--engine vllm applies its own xgrammar masks; "
                                f"--grammar-backend {settings.grammar_backend} is for the "
                                "torch engine")
    if not settings.policies.strict_objects and (settings.engine == "vllm"
                                        or settings.grammar_backend == "outlines"):
        raise EngineConfigError("--no-strict-objects needs the torch engine with xgrammar: "
                                f"{'vLLM' if settings.engine == 'vllm' else 'outlines-core'}"
                                " never writes keys an object's properties do not list")
    if settings.json_layout != "compact" and (settings.engine in ("vllm", "upstream")
                                              or settings.grammar_backend == "outlines"):
        raise EngineConfigError(f"--json-layout {settings.json_layout} needs an embedded "
                                "engine with the xgrammar or llguidance backend; vLLM and "
                                "outlines-core write JSON in their own layout")
    if settings.cold_compile == "bridge" and (settings.engine == "vllm"
                                              or settings.grammar_backend != "xgrammar"):
        raise EngineConfigError("--cold-compile bridge bridges xgrammar's compiles with "
                                "llguidance in the embedded engines; use --grammar-backend "
                                "xgrammar without --engine vllm (vLLM compiles its own)")
    if settings.engine == "vllm" and importlib.util.find_spec("vllm") is None:
        raise EngineConfigError("--engine vllm: vLLM is not installed in this Python "
                                f"({sys.prefix}); run `make setup-vllm` and start "
                                ".venv-vllm/bin/strictcall, or install vllm on a GPU host "
                                "(Dockerfile.gpu)")


def _check_llamacpp(settings: Settings) -> None:
    from server.model_store import find_gguf

    if importlib.util.find_spec("llama_cpp") is None:
        raise EngineConfigError("--engine llamacpp: llama-cpp-python is not installed in this "
                                f"Python ({sys.prefix}); `make setup` builds it, or use "
                                "--engine torch")
    if settings.device.startswith("cuda"):
        raise EngineConfigError("--engine llamacpp runs on the CPU here; use --engine torch "
                                "(or vllm) on a CUDA GPU")
    model_dir = resolve_model(settings.model, settings.cache_dir,
                          chat_template=settings.chat_template)
    if find_gguf(model_dir) is None:
        raise EngineConfigError(f"--engine llamacpp needs a .gguf file in {str(model_dir)!r} "
                                "beside the tokenizer files; add the model's GGUF there or "
                                "use --engine torch")


def _check_upstream(settings: Settings) -> None:
    if not settings.upstream:
        raise EngineConfigError("--engine upstream needs the vLLM server(s) to send requests "
                                "to: --upstream http://HOST:PORT (repeatable)")
    for url in settings.upstream:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise EngineConfigError(f"--upstream {url!r} is not an http(s) URL; give the "
                                    "vLLM server's root, e.g. http://vllm:8000")
    unsupported = [flag for flag, off in (
        (f"--grammar-backend {settings.grammar_backend}", settings.grammar_backend != "xgrammar"),
        ("--cold-compile bridge", settings.cold_compile == "bridge"),
        ("--no-strict-objects", not settings.policies.strict_objects)) if off]
    if unsupported:
        raise EngineConfigError(f"--engine upstream: the upstream vLLM applies its own xgrammar "
                                f"masks, so {unsupported[0]} cannot apply; leave it out")
    _tokenizer_dir(settings)


def _tokenizer_dir(settings: Settings) -> Path:
    """`--model` for --engine upstream: a directory with the tokenizer, chat template and
    config.json (no weights needed); the embedded model's by default."""
    if settings.model is None:
        return resolve_model(None, settings.cache_dir)
    path = Path(settings.model).expanduser()
    if not (path / "config.json").is_file() or not any(
            (path / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json")):
        raise EngineConfigError(f"--model {str(path)!r} needs config.json and the tokenizer "
                                "files (tokenizer.json, tokenizer_config.json) of the model "
                                "the upstream serves; weights are not needed")
    return path


def _build_upstream(settings: Settings) -> Engine:
    from server.engines.upstream import UpstreamEngine, UpstreamOptions

    model_dir = _tokenizer_dir(settings)
    options = UpstreamOptions(
        model=settings.upstream_model, connect_timeout_s=settings.upstream_connect_timeout_s,
        read_timeout_s=settings.upstream_read_timeout_s,
        cooldown_s=settings.upstream_cooldown_s, whitespace=settings.upstream_json,
        max_model_len=settings.max_model_len, eject_after=settings.upstream_eject_after,
        probe=settings.upstream_probe, resolve=settings.upstream_resolve,
        check_tokenizer=settings.upstream_check_tokenizer)
    return UpstreamEngine(model_dir, urls=settings.upstream, options=options,
                          model_name=settings.served_model_name or model_dir.name)


def build_engine(settings: Settings) -> Engine:
    engine = _build(settings)
    log.info("engine memory: %s", describe(engine.memory()))
    return engine


class BuildingEngine:
    """build_engine(settings) started now, in a thread of its own; called (as the app's
    engine factory, with the same settings) it waits for that engine, or raises what the
    build raised. `strictcall serve` starts it before importing the app's modules, so
    llama.cpp loads the weights, clears its cache and times its steps (native calls, the GIL
    released) while the interpreter imports: measured, ready in 2.25 s against 2.65 s.
    The thread is a daemon: a server that fails to start for another reason exits at once.
    Only for the llama.cpp engine: vLLM starts processes and signal handlers of its own,
    the torch engine's load holds the GIL, an upstream engine loads no model."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._engine: Future[Engine] = Future()
        threading.Thread(target=self._build, name="engine-build", daemon=True).start()

    def _build(self) -> None:
        # Meanwhile the GIL changes hands every 0.5 ms, not 5: each file an import reads or
        # stats gives it up, and would wait a whole interval to get it back from this
        # thread's Python (tokenizer, grammar backend). Measured: ready 2.25 s against 2.44.
        interval = sys.getswitchinterval()
        sys.setswitchinterval(min(interval, 0.0005))
        try:
            self._engine.set_result(build_engine(self.settings))
        except Exception as exc:  # noqa: BLE001 - raised where the engine is asked for
            self._engine.set_exception(exc)
        finally:
            sys.setswitchinterval(interval)

    def __call__(self, settings: Settings) -> Engine:
        if settings is not self.settings:
            raise ValueError("an engine built in the background is for the settings it "
                             "was started with")
        return self._engine.result()


def engine_factory(settings: Settings) -> Callable[[Settings], Engine]:
    """The app's engine factory for `settings`: the llama.cpp engine's build started now
    (BuildingEngine), any other built when the app starts."""
    try:
        background = resolve_engine(settings) == "llamacpp"
    except (EngineConfigError, ModelNotFoundError):  # said where the app builds it
        background = False
    if not background:
        return build_engine
    # The engine's modules imported here, on the caller's thread: the build's own thread then
    # imports only llama.cpp's binding, and the grammar backend's (LlamaCppEngine says why).
    import server.engines.llamacpp_engine  # noqa: F401

    return BuildingEngine(settings)


def _build(settings: Settings) -> Engine:
    if settings.engine == "upstream":
        return _build_upstream(settings)
    model_dir = resolve_model(settings.model, settings.cache_dir,
                              chat_template=settings.chat_template)
    family = applied_family_template(model_dir)
    if family is not None:
        log.info("chat template: %s's, shipped here; the GGUF has none and its architecture "
                 "and vocabulary are that family's (--chat-template FILE to choose one)",
                 family)
    engine = resolve_engine(settings)
    if engine == "vllm":
        from server.engines.vllm_engine import VllmEngine, VllmOptions

        options = VllmOptions(
            device=settings.device, threads=settings.threads,
            tensor_parallel_size=settings.tensor_parallel_size,
            gpu_memory_utilization=settings.gpu_memory_utilization,
            max_model_len=settings.max_model_len, dtype=settings.dtype,
            enable_prefix_caching=settings.enable_prefix_caching,
            speculate_tokens=settings.vllm_speculate_tokens)
        return VllmEngine(model_dir, options=options,
                          cache_dir=settings.cache_dir or default_cache_dir(),
                          model_name=settings.served_model_name or model_dir.name)
    # The engines that step the model themselves (engines/loop.py) take the same options.
    stepped: SteppedOptions = {
        "threads": settings.threads, "max_batch": settings.max_batch,
        "model_name": settings.served_model_name or model_dir.name,
        "grammar_backend": BRIDGE if bridged(settings) else settings.grammar_backend,
        "step_timeout_s": settings.step_timeout_s, "jump_forward": settings.jump_forward,
        "prefix_cache_bytes": settings.prefix_cache_mb * 2**20,
        "schedule": SchedulePolicy(prefill_chunk=settings.prefill_chunk,
                                   prefill_share=settings.prefill_share,
                                   short_prefill=settings.short_prefill,
                                   prefill_order=settings.prefill_order),
        "speculation": Speculation(max_tokens=settings.speculate_tokens,
                                   token_cost=settings.draft_cost)}
    if engine == "llamacpp":
        from server.engines.llamacpp_engine import LlamaCppEngine

        return LlamaCppEngine(model_dir, max_context=settings.max_model_len, **stepped)
    from server.engines.torch_engine import TorchEngine

    return TorchEngine(model_dir, device=settings.device, **stepped)
