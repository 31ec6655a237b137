"""Server settings: flags override STRICTCALL_* environment variables, which override defaults."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, create_model
from pydantic_settings import BaseSettings, SettingsConfigDict

from grammars import POLICY_FLAGS, Budget


class _Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="STRICTCALL_", extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    model: str | None = None  # None: the embedded SmolLM2-135M-Instruct
    served_model_name: str | None = None
    cache_dir: Path | None = None
    # "auto": llama.cpp on CPU hosts where it is installed and the model has a GGUF, else
    # torch (engines/factory.py resolve_engine).
    engine: Literal["auto", "torch", "llamacpp", "vllm"] = "auto"
    # Token masks from xgrammar (default), llguidance or outlines-core (the last two: torch
    # engine only).
    grammar_backend: Literal["xgrammar", "llguidance", "outlines"] = "xgrammar"
    # A schema not compiled yet: "wait" for the backend, or "bridge" (xgrammar, torch
    # engine): decode under llguidance's mask, compiled in milliseconds, while xgrammar
    # compiles in the background, where both masks enforce the same keywords
    # (grammars/bridge.py). "auto": bridge where it applies (torch engine with xgrammar),
    # chosen by measurement (README, "Cold compile"). "bridge_wait_s": how long a miss
    # waits for xgrammar first.
    cold_compile: Literal["auto", "wait", "bridge"] = "auto"
    bridge_wait_s: float = Field(0.025, ge=0, le=10)
    device: str = "auto"
    # vLLM engine arguments (None: vLLM's default; on CPU, max_model_len 2048 and bfloat16).
    tensor_parallel_size: int = Field(1, ge=1)
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)
    max_model_len: int | None = Field(None, ge=16)
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "auto"
    enable_prefix_caching: bool | None = None
    # Compile registered contracts' grammars at startup (off only to measure a cold start).
    warm_grammars: bool = True
    # One thread: on 2-core hosts a second thread collapses decode speed under any other load.
    threads: int = Field(1, ge=1)
    # Jump-forward (torch and llama.cpp engines): tokens the grammar forces are fed in one
    # forward pass instead of one step each. Prefix reuse: the KV cache of earlier prompts'
    # shared beginnings, bounded in MiB (0: off).
    jump_forward: bool = True
    prefix_cache_mb: int = Field(256, ge=0)
    max_batch: int = Field(8, ge=1, le=256)
    grammar_cache_entries: int = Field(512, ge=1)
    grammar_cache_bytes: int = Field(512 * 2**20, ge=1)
    # Entries unused this long are dropped (the disk store brings them back in milliseconds).
    grammar_cache_ttl_s: float | None = Field(6 * 3600.0, gt=0)
    # Compiled grammars also go to <cache_dir>/grammars, so a restart starts warm.
    grammar_disk_cache: bool = True
    compile_timeout_s: float = Field(10.0, gt=0, le=600)
    # Complexity budgets for client schemas (registered contracts are trusted).
    max_tools: int = Field(Budget.max_tools, ge=1)
    max_optional_params: int = Field(Budget.max_optional_params, ge=0)
    max_union_params: int = Field(Budget.max_union_params, ge=0)
    max_depth: int = Field(Budget.max_depth, ge=1)
    max_enum_values: int = Field(Budget.max_enum_values, ge=1)
    max_schema_bytes: int = Field(Budget.max_schema_bytes, ge=2)
    compile_workers: int = Field(2, ge=1, le=32)
    default_max_tokens: int = Field(512, ge=1)
    # The embedded model is tiny: greedy unless the client asks for a temperature.
    default_temperature: float = Field(0.0, ge=0.0, le=2.0)
    # tool_choice="auto": "decide" opens the call block and lets the model write `[]` (then a
    # second, text pass answers), which small models follow; "trigger" lets the model write
    # text and constrains a call once it writes the opening tag: one pass, for larger models.
    auto_tools: Literal["decide", "trigger"] = "decide"
    # Modules or .py files with @tool contracts, loaded and warmed at startup.
    contracts: list[str] = Field(default_factory=list)
    # Runaway guards (server/pipeline/runaway.py): a call identical to an earlier one closes
    # the call list; a value that repeats itself is steered away from the repeat ("steer",
    # engines that choose tokens themselves) or stopped (finish_reason "length").
    dedupe_calls: bool = True
    loop_guard: Literal["off", "stop", "steer"] = "stop"
    # How a JSON answer's schema is written into the prompt: the JSON Schema ("raw"), a
    # compact TypeScript-like shape, or nothing beyond the grammar (default: measured no less
    # accurate and faster to the first token; bench/schema_prompt.py, README).
    schema_prompt: Literal["raw", "compact", "none"] = "none"
    # How tools are written into the prompt for a required or forced call, in the generic
    # format (families with their own template render tools in it): JSON lines with their
    # JSON Schema ("full"), a TypeScript-like argument shape ("compact"), or names and
    # descriptions only ("none"; the grammar writes every key). "auto": none for a call
    # forced to a named tool (a third of the prompt, as accurate on BFCL), full where the
    # model chooses the tool (an agent loop needs it). bench/bfcl.py, README.
    tool_prompt: Literal["auto", "full", "compact", "none"] = "auto"
    # The model's tool-call and thinking syntax (server/formats): "auto" detects it from the
    # chat template and config; a name forces one (README, "Model formats").
    model_format: str = "auto"
    # The free-reasoning pass's default budget in tokens (0: off); None: off, unless the
    # format has its own thinking block (then reasoning_effort "medium"'s budget).
    reasoning: int | None = Field(None, ge=0, le=32768)
    # Calls in one response at most (the call grammar's maxItems); None: no limit.
    max_calls: int | None = Field(None, ge=1, le=64)
    repair_attempts: int = Field(2, ge=0, le=5)
    repair_seconds: float = Field(10.0, gt=0, le=120)
    # Who may call (server/identity.py): a YAML/JSON file of API keys; None: anyone who
    # reaches the port, and runtime fields come from the headers the client sends.
    api_keys_file: Path | None = None
    # With keys on, /metrics also needs a key with the `metrics` or `admin` role.
    metrics_auth: bool = False
    # Limits: a larger body is a 413 before it is parsed; max_tokens above the cap a 400.
    max_body_bytes: int = Field(4 * 2**20, ge=1024)
    max_tokens_cap: int | None = Field(None, ge=1)
    # A request still running after this long is cancelled and answered 504 (retryable).
    request_timeout_s: float | None = Field(300.0, gt=0)
    # Generation requests admitted beyond the engine's batch; one more is a 429 at once.
    max_queued: int = Field(32, ge=0)
    # After SIGTERM: new requests get 503; in-flight ones have this long to finish.
    shutdown_grace_s: float = Field(30.0, ge=0, le=3600)
    # Per-key rate limits (server/ratelimit.py), for keys whose entry sets none; None: no
    # limit. Only with API keys: without them there is no one to count against.
    requests_per_minute: int | None = Field(None, ge=1)
    tokens_per_minute: int | None = Field(None, ge=1)
    # The torch and llama.cpp engines' watchdog (engines/loop.py): one prefill or decode step
    # running longer than this fails the requests it holds (503) and /health reports the
    # engine unhealthy until it returns.
    step_timeout_s: float = Field(60.0, gt=0, le=3600)
    # Records: log lines as text or one JSON object per line; an audit log (JSONL) of every
    # tool-call decision, rotated at a size, keeping that many older files.
    log_format: Literal["text", "json"] = "text"
    audit_log: Path | None = None
    audit_log_max_bytes: int = Field(64 * 2**20, ge=1024)
    audit_log_backups: int = Field(5, ge=0, le=1000)
    # The execution layer (server/execution): who may use which tool (a YAML or TOML policy
    # file; None: every tool allowed to everyone, no catalogs), tool selection when a request
    # offers more than max_tools or names a catalog (bm25, k tools; "off": over the budget is
    # a 400), running calls of contracts with handlers (a time limit per attempt unless the
    # contract sets one; reads retried), the idempotency store (default <cache dir>/tools.sqlite3),
    # and an optional file of OpenTelemetry spans (JSON lines).
    policy: Path | None = None
    tool_selection: Literal["bm25", "off"] = "bm25"
    select_k: int = Field(5, ge=1, le=64)
    tools_db: Path | None = None
    trace_file: Path | None = None

    @property
    def policies(self) -> dict[str, Any]:
        """The grammar's generation policies (grammars.POLICY_FLAGS), by name."""
        return {f.name: getattr(self, f.name) for f in POLICY_FLAGS}

    @property
    def budget(self) -> Budget:
        return Budget(self.max_tools, self.max_optional_params, self.max_union_params,
                      self.max_depth, self.max_enum_values, self.max_schema_bytes)


# The grammar policies' settings come from their one table (grammars.POLICY_FLAGS): name,
# values and default, as STRICTCALL_<NAME> variables and --<name> flags.
Settings = create_model(  # type: ignore[call-overload]
    "Settings", __base__=_Settings, __module__=__name__,
    **{f.name: (f.annotation, f.default) for f in POLICY_FLAGS})
