"""Server settings, each written once: its type, default, constraints and help here; the
`strictcall serve` flags are generated from these fields (server/cli_flags.py). Flags
override STRICTCALL_* environment variables, which override the defaults."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from grammars import Budget
from server.options import AfterResults, AutoTools, LoopGuard, SchemaPrompt, ToolPrompt
from server.settings_parts import (
    ACCESS,
    ENV_PREFIX,
    RECORDS,
    SCHEDULE,
    STATE,
    TOOLS,
    UPSTREAM,
    VLLM,
    GrammarPolicies,
    PolicyEnv,
    nested_policies,
    setting,
)

__all__ = ["ENV_PREFIX", "GrammarPolicies", "Settings", "setting"]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid")

    host: str = setting("127.0.0.1", "address to listen on (beyond this machine, only with "
                                     "--api-keys or --open-without-keys)")
    open_without_keys: bool = setting(False, "listen beyond localhost without --api-keys: "
                                             "anyone who reaches the port may call",
                                      group=ACCESS)
    port: int = setting(8000, "port to listen on", ge=0, le=65535)
    model: str | None = setting(None, "local Hugging Face model directory or GGUF file "
                                      "(default: the embedded SmolLM2-135M-Instruct)")
    chat_template: Path | None = setting(None, "a Jinja chat template file for a GGUF model "
                                               "whose file has none (a base model's) or to "
                                               "replace its own", metavar="FILE")
    served_model_name: str | None = setting(None, "the model's name in the API (default: "
                                                  "the model directory's name)")
    cache_dir: Path | None = setting(None, "models, compiled grammars and state (default "
                                           "$XDG_CACHE_HOME/strictcall)")
    # "auto": llama.cpp on CPU hosts where it is installed and the model has a GGUF, else
    # torch (engines/factory.py resolve_engine), chosen by measurement.
    engine: Literal["auto", "torch", "llamacpp", "vllm", "upstream"] = setting(
        "auto", "auto (llamacpp on CPU hosts where it is installed, else torch), torch, "
                "llamacpp (llama-cpp-python, GGUF), vllm (needs `make setup-vllm`) or "
                "upstream (vLLM servers you run: --upstream)")
    grammar_backend: Literal["xgrammar", "llguidance", "outlines"] = setting(
        "xgrammar", "token masks from xgrammar (default), llguidance (compiles in "
                    "milliseconds) or outlines-core (the last two: embedded engines only)")
    # A schema not compiled yet: "wait" for the backend, or "bridge": decode under
    # llguidance's mask, compiled in milliseconds, while xgrammar compiles in the background
    # (grammars/bridge.py). "auto": bridge where it applies, chosen by measurement.
    cold_compile: Literal["auto", "wait", "bridge"] = setting(
        "auto", "a schema not compiled yet: wait for xgrammar, or decode under llguidance's "
                "mask meanwhile where both enforce the same (default auto: bridge in the "
                "embedded engines with xgrammar)")
    bridge_wait_s: float = setting(0.025, "how long a cold compile waits for xgrammar before "
                                          "the bridge (compiling beside it) may serve it",
                                   ge=0, le=10)
    # Measured with `strictcall-bench schema-prompt --layouts compact,spaced` (400 BFCL json
    # answers each): with no schema in the prompt (the default), compact 25% AST-correct,
    # spaced 27% (8 answers of 400: two rates near 26% over 400 answers, read as independent
    # samples, differ by about 3 points by chance); with the raw schema, 21% and 26%.
    # Spaced writes 8% more tokens (44.7 against 41.3 an answer), so compact stays the
    # default until a difference shows at the default prompt.
    json_layout: Literal["compact", "spaced"] = setting(
        "compact", "the layout of JSON the grammar writes from a schema (response_format "
                   "answers; calls written as a JSON array): compact, `,` and `:` "
                   "(default), or spaced, `, ` and `: ` as json.dumps and vLLM write it; "
                   "no other whitespace either way")
    device: str = setting("auto", "auto (default), cpu, cuda, cuda:N")
    # llama.cpp never holds a torch tensor, but libraries import torch wherever it is
    # installed: about 200 MiB (engines/factory.py keep_torch_out).
    torch_free: bool = setting(True, "keep torch out of a llama.cpp server's process (about "
                                     "200 MiB); --no-torch-free where your contracts or "
                                     "tool handlers import torch")
    # vLLM engine arguments (None: vLLM's default; on CPU, max_model_len 2048 and bfloat16).
    tensor_parallel_size: int = setting(1, "vLLM tensor parallel size", group=VLLM, ge=1)
    gpu_memory_utilization: float | None = setting(None, "vLLM GPU memory fraction",
                                                   group=VLLM, gt=0, le=1)
    max_model_len: int | None = setting(None, "context length (vLLM; llama.cpp)", group=VLLM,
                                        ge=16)
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = setting(
        "auto", "vLLM weights dtype", group=VLLM)
    enable_prefix_caching: bool | None = setting(None, "vLLM prefix caching", group=VLLM)
    vllm_speculate_tokens: int = setting(0, "tokens vLLM drafts from the prompt per step "
                                            "(its n-gram speculative decoding; 0: off)",
                                         group=VLLM, ge=0, le=16)
    # --engine upstream (server/engines/upstream.py): vLLM servers StrictCall does not run.
    upstream: list[str] = setting([], "a vLLM server's URL, e.g. http://vllm:8000 (repeatable; "
                                      "or one router's URL)", group=UPSTREAM, metavar="URL")
    upstream_model: str | None = setting(None, "the model name the upstreams serve (default: "
                                               "the one GET /v1/models lists)", group=UPSTREAM)
    upstream_connect_timeout_s: float = setting(3.0, "an upstream not connected in this long "
                                                     "is out of rotation; the request moves",
                                                group=UPSTREAM, gt=0, le=60)
    upstream_read_timeout_s: float = setting(60.0, "longest wait for the first token (then "
                                                   "the request moves) and between tokens "
                                                   "(then a 503)", group=UPSTREAM, gt=0)
    upstream_cooldown_s: float = setting(5.0, "a failed upstream stays out of rotation this "
                                              "long, then is probed back", group=UPSTREAM,
                                         gt=0, le=3600)
    # vLLM takes the JSON whitespace setting from its server config only (upstream_wire.py).
    # Outlier ejection as load balancers do it (Envoy's consecutive_5xx): one slow request
    # is not a broken upstream; a refused connection is.
    upstream_eject_after: int = setting(3, "consecutive failures (no first token in time, a "
                                           "5xx, a malformed stream, a failed probe) that "
                                           "take one upstream out of rotation; a refused "
                                           "connection takes it out at once",
                                        group=UPSTREAM, ge=1, le=100)
    upstream_probe: Literal["decode", "models"] = setting(
        "decode", "how an upstream is probed: a one-token decode (catches a dead engine "
                  "behind a live HTTP server) or GET /v1/models", group=UPSTREAM)
    upstream_resolve: bool = setting(False, "resolve each --upstream host name to all its "
                                            "addresses (a headless Service) and balance over "
                                            "each, re-resolved every 30 s", group=UPSTREAM)
    upstream_check_tokenizer: bool = setting(True, "keep an upstream whose tokenizer differs "
                                                   "from --model's out of rotation (checked "
                                                   "with its /tokenize)", group=UPSTREAM)
    upstream_json: Literal["bounded", "server"] = setting(
        "bounded", "JSON schemas as a structural tag with at most one whitespace in a row "
                   "(bounded), or as vLLM's json kind, for servers started with "
                   "disable_any_whitespace (server)", group=UPSTREAM)
    policies: GrammarPolicies = Field(default_factory=GrammarPolicies)
    warm_grammars: bool = setting(True, "compile registered contracts' grammars at startup "
                                        "(off only to measure a cold start)")
    # One thread: on 2-core hosts a second thread collapses decode speed under any other load.
    threads: int = setting(1, "CPU compute threads", ge=1)
    jump_forward: bool = setting(True, "feed the tokens a grammar forces in one forward pass "
                                       "(torch and llamacpp engines)")
    prefix_cache_mb: int = setting(256, "KV cache kept for repeated prompt beginnings, at "
                                        "most, in MiB (torch and llamacpp engines; llama.cpp "
                                        "keeps them in free cells of its context; 0: off)",
                                   ge=0)
    # 2, measured (README "Scheduling"): on a compute-bound CPU every extra row slows each
    # step; 2 rows gave 0.85x (4 clients) and 0.82x (16) the median latency of 8.
    max_batch: int = setting(2, "requests decoded together", ge=1, le=256)
    # The decode loop's scheduler (server/engines/scheduler.py; defaults chosen by
    # `strictcall-bench latency`, README "Scheduling").
    prefill_chunk: int = setting(128, "most prompt tokens prefilled in one engine step",
                                 group=SCHEDULE, ge=1, le=8192)
    prefill_share: float = setting(0.25, "share of engine time prompts' prefill gets while "
                                         "other requests decode (0: decode first, 1: prefill "
                                         "first)", group=SCHEDULE, ge=0.0, le=1.0)
    short_prefill: int = setting(16, "a prompt with at most this many tokens left to prefill "
                                     "(a prefix-cache hit) joins the running batch at once",
                                 group=SCHEDULE, ge=0)
    prefill_order: Literal["shortest", "arrival"] = setting(
        "shortest", "which waiting prompt is prefilled first", group=SCHEDULE)
    speculate_tokens: int = setting(8, "tokens drafted from the prompt per step, kept where "
                                       "the model agrees (greedy requests; 0: off)",
                                    group=SCHEDULE, ge=0, le=64)
    draft_cost: float | None = setting(None, "model steps one drafted token costs; rows draft "
                                             "only as far as their odds pay for it, none at "
                                             "1 or more (default: measured at start-up)",
                                       group=SCHEDULE, ge=0, metavar="STEPS")
    grammar_cache_entries: int = setting(512, "compiled grammars kept in memory", ge=1)
    grammar_cache_bytes: int = setting(512 * 2**20, "bytes of compiled grammars kept in "
                                                    "memory", ge=1)
    # Entries unused this long are dropped (the disk store brings them back in milliseconds).
    grammar_cache_ttl_s: float | None = setting(6 * 3600.0, "drop a compiled grammar unused "
                                                            "this long", gt=0)
    grammar_disk_cache: bool = setting(True, "keep compiled grammars in <cache dir>/grammars, "
                                             "so a restart starts warm")
    grammar_disk_cache_mb: int = setting(512, "the grammar disk cache's size at most; past "
                                              "it, the least recently used go", ge=1)
    compile_timeout_s: float = setting(10.0, "a schema compiling longer is a 400", gt=0,
                                       le=600)
    # Complexity budgets for client schemas (registered contracts are trusted).
    max_tools: int = setting(Budget.max_tools, "tools in one request", ge=1)
    max_optional_params: int = setting(Budget.max_optional_params,
                                       "optional top-level parameters per schema", ge=0)
    max_union_params: int = setting(Budget.max_union_params,
                                    "top-level union parameters per schema", ge=0)
    max_depth: int = setting(Budget.max_depth, "subschema nesting", ge=1)
    max_enum_values: int = setting(Budget.max_enum_values, "values in one enum", ge=1)
    max_schema_bytes: int = setting(Budget.max_schema_bytes, "a schema's compact JSON size",
                                    ge=2)
    compile_workers: int = setting(2, "threads compiling grammars", ge=1, le=32)
    default_max_tokens: int = setting(512, "max_tokens when a request sends none (a "
                                           "reasoning pass adds its budget)", ge=1)
    # The embedded model is tiny: greedy unless the client asks for a temperature.
    default_temperature: float = setting(0.0, "temperature when a request sends none",
                                         ge=0.0, le=2.0)
    # "decide" suits small models; "trigger" is one pass, for larger ones (server/formats).
    auto_tools: AutoTools = setting("decide", "how tool_choice=auto decides between a call "
                                              "and text")
    # Measured with bench/dialogue/agent_loop.py: an agent loop on the embedded model ends in a text
    # answer that uses the result (docs/apis/chat-completions.md, "Agent loops").
    after_results: AfterResults = setting("answer-first", "tool_choice=auto after a tool "
                                                          "result: the answer first, a call "
                                                          "only behind the model's own "
                                                          "marker; or as --auto-tools")
    contracts: list[str] = setting([], "load @tool contracts from a module or .py file "
                                       "(repeatable)", metavar="MODULE_OR_FILE")
    # Runaway guards (server/pipeline/guards/runaway.py).
    dedupe_calls: bool = setting(True, "close the call list when a call repeats an earlier "
                                       "one, or one already answered since the user's "
                                       "last message (off: polling)")
    # steer, measured (README "Runaway guards"): BFCL forced calls (40 per category) cut off
    # 1/2/4 under "stop", 0/2/4 under "steer" (simple_python/multiple/parallel); a later run
    # with "off" beside it: off 1/1/5, steer 0/1/2, 17 of 120 answers changed, 1 made
    # BFCL-correct and 1 broken.
    loop_guard: LoopGuard = setting("steer", "a value that repeats itself: steered away from "
                                            "the repeat (engines that choose tokens) or "
                                            "stopped with finish_reason 'length'")
    # bench/accuracy/schema_prompt.py, 400 BFCL json answers (simple_python and multiple), compact:
    # "none" 25% AST-correct against "raw" 21% (llama-server 21%), with a third of the
    # prompt; spaced, 27% against 26%.
    schema_prompt: SchemaPrompt = setting("none", "how a JSON answer's schema is written into "
                                                  "the prompt")
    # Measured on BFCL (bench/accuracy/bfcl.py): "none" is as accurate for a forced call, with a
    # third of the prompt; an agent loop choosing its tool needs "full".
    tool_prompt: ToolPrompt = setting("auto", "how tools are written into the prompt for a "
                                              "required or forced call (smollm2 format; auto: "
                                              "none when forced to a named tool, else full)")
    model_format: str = setting("auto", "the model's tool-call and thinking syntax: auto "
                                        "(detect from the chat template) or a family name",
                                metavar="auto|NAME")
    reasoning: int | None = setting(None, "default free-reasoning budget before each answer "
                                          "(0: off; default: off, or 512 for families that "
                                          "think)", metavar="TOKENS", ge=0, le=32768)
    max_calls: int | None = setting(None, "calls in one response at most (default: no "
                                          "limit)", ge=1, le=64)
    grounding: bool = setting(True, "grounded fields (contracts' Grounded(), schemas' "
                                    "x-strictcall-grounded) take only values copied from the "
                                    "conversation, else a question; off: written like any "
                                    "field, only to measure what grounding prevents")
    ground_from_system: bool = setting(True, "the system and developer messages are evidence "
                                             "a grounded value may be copied from (a CRM "
                                             "profile, the customer's cards), besides the "
                                             "user's words and tool results")
    # What grounding reads of a conversation, newest first (server/dialogue/evidence.py):
    # its readers cost per word, so a long conversation costs no more than this.
    grounding_max_messages: int = setting(64, "messages grounding reads at most", ge=1)
    grounding_max_chars: int = setting(24_000, "characters grounding reads at most", ge=1)
    grounding_max_words: int = setting(3_000, "words grounding reads at most", ge=1)
    repair_attempts: int = setting(2, "repair decodes of a contract call at most", ge=0, le=5)
    repair_seconds: float = setting(10.0, "time a contract call's repairs may take", gt=0,
                                    le=120)
    api_keys_file: Path | None = setting(
        None, "YAML/JSON file of API keys with identities; default: no keys, anyone who "
              "reaches the port may call", group=ACCESS, flag="--api-keys", metavar="FILE")
    metrics_auth: bool = setting(True, "with --api-keys, /metrics needs a key with the "
                                       "'metrics' or 'admin' role (--no-metrics-auth: open)",
                                 group=ACCESS)
    max_body_bytes: int = setting(4 * 2**20, "larger request bodies are a 413", group=ACCESS,
                                  ge=1024)
    max_tokens_cap: int | None = setting(None, "max_tokens above this is a 400 (default: the "
                                               "context)", group=ACCESS, ge=1)
    request_timeout_s: float | None = setting(300.0, "cancel and answer 504 after this long",
                                              group=ACCESS, gt=0)
    max_queued: int = setting(32, "generation requests waiting beyond --max-batch; more is a "
                                  "429", group=ACCESS, ge=0)
    # Slow clients (server/api/serving.py, gate.py): none may hold a place for ever.
    max_connections: int = setting(512, "open connections at most; more are answered 503",
                                   group=ACCESS, ge=1)
    keepalive_timeout_s: float = setting(5.0, "an idle kept-alive connection is closed after "
                                              "this long", group=ACCESS, gt=0, le=600)
    request_read_timeout_s: float = setting(30.0, "a request's headers not received whole in "
                                                  "this long close the connection; its body, "
                                                  "a 408", group=ACCESS, gt=0, le=3600)
    # Bounds what one connection holds in buffers (memory), and lets a client that stopped
    # reading be noticed once its share is full rather than after megabytes of autotuning.
    send_buffer_bytes: int = setting(256 * 1024, "bytes a connection's answer may hold in "
                                                  "the server's buffers (socket and "
                                                  "transport) before a write waits for the "
                                                  "client", group=ACCESS, ge=4096,
                                     le=64 * 2**20)
    stream_write_timeout_s: float = setting(30.0, "a stream whose client has not taken the "
                                                  "next event in this long is ended and its "
                                                  "place freed", group=ACCESS, gt=0, le=3600)
    shutdown_grace_s: float = setting(30.0, "after SIGTERM, in-flight requests get this long",
                                      group=ACCESS, ge=0, le=3600)
    # Only with API keys: without them there is no one to count against.
    requests_per_minute: int | None = setting(None, "with --api-keys, each key's requests per "
                                                    "minute unless its entry sets its own",
                                              group=ACCESS, ge=1)
    tokens_per_minute: int | None = setting(None, "with --api-keys, each key's prompt+"
                                                  "completion tokens per minute unless its "
                                                  "entry sets its own", group=ACCESS, ge=1)
    step_timeout_s: float = setting(60.0, "torch and llamacpp engine watchdog: a step running "
                                          "longer fails its requests (503) and marks /health "
                                          "degraded", group=ACCESS, gt=0, le=3600)
    policy: Path | None = setting(None, "YAML or TOML policy: which identity may see, call and "
                                        "run which tool, and the registered catalogs "
                                        "(default: all allowed)", group=TOOLS, metavar="FILE")
    tool_selection: Literal["bm25", "off"] = setting(
        "bm25", "a request over --max-tools, or naming a catalog, gets its k most relevant "
                "tools (bm25) or a 400 (off)", group=TOOLS)
    select_k: int = setting(5, "tools kept by selection", group=TOOLS, ge=1, le=64)
    handler_workers: int = setting(8, "threads per tool owner for sync handlers; a call "
                                      "finding all busy (earlier calls hung) fails at once, "
                                      "retryable, without running", group=TOOLS, ge=1, le=256)
    execution_lease_s: float = setting(15.0, "a running write renews its key's lease every "
                                             "third of this; a key not renewed this long "
                                             "lost its replica (side_effect_unknown) and may "
                                             "be resolved", group=TOOLS, gt=0, le=3600)
    # Stripe keeps idempotency keys 24 hours.
    idempotency_ttl_s: float = setting(86400.0, "an idempotency key and its outcome are "
                                                "kept this long after their last change",
                                       group=TOOLS, gt=0)
    approval_ttl_s: float = setting(86400.0, "an approval_required call can be approved "
                                             "this long after it was asked for",
                                    group=TOOLS, gt=0)
    outcome_journal: Path | None = setting(None, "the local file where outcomes the state "
                                                 "store did not take wait for it (default "
                                                 "<cache dir>/outcomes.journal)", group=TOOLS,
                                           metavar="FILE")
    tools_db: Path | None = setting(None, "deprecated: --state-url sqlite:///FILE says the "
                                          "same", group=TOOLS, metavar="FILE")
    # server/state: idempotency keys, executions, and later sessions and stored responses.
    state_url: str | None = setting(None, "where state lives: sqlite:///FILE (default "
                                          "<cache dir>/state.sqlite3), or postgresql://... "
                                          "shared by replicas", group=STATE, metavar="URL")
    # Sessions (server/sessions): the arguments collected across turns, and stored responses.
    slot_ttl_s: float = setting(1800.0, "a session's collected arguments (slots) expire this "
                                        "long after the last turn about their tool",
                                group=STATE, gt=0)
    # OpenAI keeps stored responses 30 days; so does this server by default.
    response_ttl_s: float = setting(30 * 86400.0, "a stored Responses API response (store="
                                                  "true, the default) is kept this long",
                                    group=STATE, gt=0)
    replica_name: str | None = setting(None, "this replica's stable name (a StatefulSet "
                                             "pod's): its outcome journal is named by it "
                                             "(default: the host name and port)", group=STATE)
    max_chain: int = setting(200, "responses one previous_response_id chain holds at most "
                                  "(its stored items are also bounded by --max-body-bytes)",
                             group=STATE, ge=1)
    state_timeout_s: float = setting(5.0, "a state operation not answered in this long is a "
                                          "503 with Retry-After (and, not started yet, never "
                                          "runs); also the database's statement timeout",
                                     group=STATE, gt=0, le=600)
    state_workers: int = setting(8, "threads talking to the state store; 4 times as many "
                                    "operations may wait, more are a 503 at once",
                                 group=STATE, ge=1, le=256)
    state_connect_timeout_s: float = setting(5.0, "a new database connection not made in "
                                                  "this long fails", group=STATE, gt=0, le=600)
    state_pool_size: int = setting(10, "database connections per replica at most",
                                   group=STATE, ge=1, le=1000)
    state_max_bytes: int | None = setting(None, "SQLite: the state file's size at most; full, "
                                                "writes are a 503 (default: no bound)",
                                          group=STATE, ge=65536)
    sweep_every_s: float = setting(300.0, "delete expired state records (and audit files past "
                                          "--audit-log-max-age-s) this often", group=STATE,
                                   gt=0)
    state_secret: str | None = setting(None, "seals contracts' Redact() values in stored "
                                             "sessions; every replica needs the same (set it "
                                             "as STRICTCALL_STATE_SECRET: a flag shows in the "
                                             "process list). Default: one per process",
                                       group=STATE, metavar="SECRET", min_length=16)
    replicas: int = setting(1, "how many replicas serve this deployment: above 1, a state "
                               "store of this process's own (SQLite, memory) is refused",
                            group=STATE, ge=1)
    rate_limit_url: str | None = setting(None, "where rate-limit buckets live: in this "
                                               "process (default), or redis://... shared by "
                                               "replicas", group=STATE, metavar="URL")
    trace_file: Path | None = setting(None, "append each request's OpenTelemetry span as a "
                                            "JSON line", group=TOOLS, metavar="FILE")
    log_format: Literal["text", "json"] = setting("text", "text, or one JSON object per line",
                                                  group=RECORDS)
    audit_log: Path | None = setting(None, "write one JSON line per tool-call decision to "
                                           "FILE", group=RECORDS, metavar="FILE")
    audit_log_max_bytes: int = setting(64 * 2**20, "rotate the audit log at this size",
                                       group=RECORDS, ge=1024)
    audit_log_backups: int = setting(5, "rotated audit files kept: FILE.1 ... FILE.N",
                                     group=RECORDS, ge=0, le=1000)
    audit_log_max_age_s: float | None = setting(90 * 86400.0, "rotated audit files older than "
                                                              "this are deleted",
                                                group=RECORDS, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _flat_policies(cls, data: Any) -> Any:
        return nested_policies(data)

    @classmethod
    def settings_customise_sources(
            cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, env_settings, PolicyEnv(settings_cls), dotenv_settings, \
            file_secret_settings

    @property
    def budget(self) -> Budget:
        return Budget(self.max_tools, self.max_optional_params, self.max_union_params,
                      self.max_depth, self.max_enum_values, self.max_schema_bytes)
