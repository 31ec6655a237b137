"""`strictcall` command line: `serve`, `fetch-model`, `contracts snapshot`, `eval`.
The benchmarks have their own: `strictcall-bench` (bench/__main__.py)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from pydantic import ValidationError

from grammars import POLICY_FLAGS
from server.settings import Settings


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _parser().parse_args(argv)
    if args.command == "fetch-model":
        return _fetch_model(args)
    if args.command == "contracts":
        return _snapshot(args)
    if args.command == "eval":
        return _eval(args)
    return _serve(args)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="strictcall", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the OpenAI-compatible API")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--model", help="local Hugging Face model directory "
                                       "(default: the embedded SmolLM2-135M-Instruct)")
    serve.add_argument("--served-model-name", dest="served_model_name")
    serve.add_argument("--engine", choices=["auto", "torch", "llamacpp", "vllm"],
                       help="auto (default: llamacpp on CPU hosts where it is installed, "
                            "else torch), torch, llamacpp (llama-cpp-python, GGUF) or vllm "
                            "(needs `make setup-vllm`)")
    serve.add_argument("--device", help="auto (default), cpu, cuda, cuda:N")
    serve.add_argument("--cold-compile", dest="cold_compile",
                       choices=["auto", "wait", "bridge"],
                       help="a schema not compiled yet: wait for xgrammar, or decode under "
                            "llguidance's mask meanwhile where both enforce the same "
                            "(default auto: bridge in the embedded engines with xgrammar)")
    serve.add_argument("--grammar-backend", dest="grammar_backend",
                       choices=["xgrammar", "llguidance", "outlines"],
                       help="token masks from xgrammar (default), llguidance (compiles in "
                            "milliseconds) or outlines-core")
    vllm = serve.add_argument_group("vLLM engine arguments (with --engine vllm)")
    vllm.add_argument("--tensor-parallel-size", dest="tensor_parallel_size", type=int)
    vllm.add_argument("--gpu-memory-utilization", dest="gpu_memory_utilization", type=float)
    vllm.add_argument("--max-model-len", dest="max_model_len", type=int)
    vllm.add_argument("--dtype", choices=["auto", "bfloat16", "float16", "float32"])
    vllm.add_argument("--enable-prefix-caching", dest="enable_prefix_caching",
                      action=argparse.BooleanOptionalAction, default=None)
    for policy in POLICY_FLAGS:  # the grammar's generation policies, from their one table
        if policy.choices is None:
            serve.add_argument(policy.flag, dest=policy.name, default=None,
                               action=argparse.BooleanOptionalAction, help=policy.help)
        else:
            serve.add_argument(policy.flag, dest=policy.name, choices=policy.choices,
                               help=policy.help)
    serve.add_argument("--grammar-disk-cache", dest="grammar_disk_cache",
                       action=argparse.BooleanOptionalAction, default=None,
                       help="keep compiled grammars in <cache dir>/grammars (default on)")
    serve.add_argument("--warm-grammars", dest="warm_grammars",
                       action=argparse.BooleanOptionalAction, default=None,
                       help="compile registered contracts' grammars at startup (default on)")
    serve.add_argument("--threads", type=int, help="CPU compute threads (default 1)")
    serve.add_argument("--jump-forward", dest="jump_forward", default=None,
                       action=argparse.BooleanOptionalAction,
                       help="feed the tokens a grammar forces in one forward pass (torch "
                            "and llamacpp engines; default on)")
    serve.add_argument("--prefix-cache-mb", dest="prefix_cache_mb", type=int,
                       help="KV cache kept for repeated prompt beginnings, in MiB (torch "
                            "and llamacpp engines; 0: off; default 256)")
    serve.add_argument("--max-batch", dest="max_batch", type=int,
                       help="requests decoded together (default 8)")
    serve.add_argument("--cache-dir", dest="cache_dir", type=Path)
    serve.add_argument("--contracts", action="append", metavar="MODULE_OR_FILE",
                       help="load @tool contracts from a module or .py file (repeatable)")
    serve.add_argument("--dedupe-calls", dest="dedupe_calls", default=None,
                       action=argparse.BooleanOptionalAction,
                       help="close the call list when a call repeats an earlier one "
                            "(default on)")
    serve.add_argument("--loop-guard", dest="loop_guard", choices=["off", "stop", "steer"],
                       help="a value that repeats itself: steered away from the repeat "
                            "(torch engine) or stopped with finish_reason 'length' "
                            "(default stop)")
    serve.add_argument("--schema-prompt", dest="schema_prompt",
                       choices=["raw", "compact", "none"],
                       help="how a JSON answer's schema is written into the prompt")
    serve.add_argument("--tool-prompt", dest="tool_prompt",
                       choices=["auto", "full", "compact", "none"],
                       help="how tools are written into the prompt for a required or forced "
                            "call (generic format; default auto: none when forced to a named "
                            "tool, else full)")
    serve.add_argument("--model-format", dest="model_format", metavar="auto|NAME",
                       help="the model's tool-call and thinking syntax: auto (detect from "
                            "the chat template) or a family name (README, Model formats)")
    serve.add_argument("--reasoning", type=int, metavar="TOKENS",
                       help="default free-reasoning budget before each answer (0: off; "
                            "default: off, or 512 for families that think)")
    serve.add_argument("--max-calls", dest="max_calls", type=int,
                       help="calls in one response at most (default: no limit)")
    serve.add_argument("--repair-attempts", dest="repair_attempts", type=int)
    serve.add_argument("--repair-seconds", dest="repair_seconds", type=float)
    serve.add_argument("--auto-tools", dest="auto_tools", choices=["decide", "trigger"],
                       help="how tool_choice=auto decides between a call and text")
    _limit_arguments(serve)
    serve.add_argument("--log-level", default="info")
    from server.eval import add_arguments as eval_arguments

    evaluate = sub.add_parser("eval", help="contract scenarios against a server: a "
                                           "regression gate for model changes")
    eval_arguments(evaluate)
    fetch = sub.add_parser("fetch-model", help="download and convert the embedded model")
    fetch.add_argument("--cache-dir", dest="cache_dir", type=Path)
    contracts = sub.add_parser("contracts", help="contract tools")
    contracts.add_argument("action", choices=["snapshot"],
                           help="snapshot: write each contract's schema to --out")
    contracts.add_argument("--contracts", action="append", metavar="MODULE_OR_FILE")
    contracts.add_argument("--out", type=Path, default=Path("contracts/snapshots"))
    return parser


def _limit_arguments(serve: argparse.ArgumentParser) -> None:
    access = serve.add_argument_group("who may call, and how much")
    access.add_argument("--api-keys", dest="api_keys_file", type=Path, metavar="FILE",
                        help="YAML/JSON file of API keys with identities (README: API keys); "
                             "default: no keys, anyone who reaches the port may call")
    access.add_argument("--metrics-auth", dest="metrics_auth", default=None,
                        action=argparse.BooleanOptionalAction,
                        help="with --api-keys, /metrics needs a key with the 'metrics' or "
                             "'admin' role (default off)")
    access.add_argument("--max-body-bytes", dest="max_body_bytes", type=int,
                        help="larger request bodies are a 413 (default 4 MiB)")
    access.add_argument("--max-tokens-cap", dest="max_tokens_cap", type=int,
                        help="max_tokens above this is a 400 (default: the context)")
    access.add_argument("--request-timeout-s", dest="request_timeout_s", type=float,
                        help="cancel and answer 504 after this long (default 300)")
    access.add_argument("--max-queued", dest="max_queued", type=int,
                        help="generation requests waiting beyond --max-batch; more is a 429 "
                             "(default 32)")
    access.add_argument("--shutdown-grace-s", dest="shutdown_grace_s", type=float,
                        help="after SIGTERM, in-flight requests get this long (default 30)")
    access.add_argument("--requests-per-minute", dest="requests_per_minute", type=int,
                        help="with --api-keys, each key's requests per minute unless its "
                             "entry sets its own; more is a 429 (default: no limit)")
    access.add_argument("--tokens-per-minute", dest="tokens_per_minute", type=int,
                        help="with --api-keys, each key's prompt+completion tokens per "
                             "minute unless its entry sets its own (default: no limit)")
    access.add_argument("--step-timeout-s", dest="step_timeout_s", type=float,
                        help="torch and llamacpp engine watchdog: a step running longer fails "
                             "its requests (503) and marks /health degraded (default 60)")
    tools = serve.add_argument_group("the execution layer (README: The execution layer)")
    tools.add_argument("--policy", type=Path, metavar="FILE",
                       help="YAML or TOML policy: which identity may see, call and run which "
                            "tool, and the registered catalogs (default: all allowed)")
    tools.add_argument("--tool-selection", dest="tool_selection", choices=["bm25", "off"],
                       help="a request over --max-tools, or naming a catalog, gets its k most "
                            "relevant tools (bm25, default) or a 400 (off)")
    tools.add_argument("--select-k", dest="select_k", type=int,
                       help="tools kept by selection (default 5)")
    tools.add_argument("--tools-db", dest="tools_db", type=Path, metavar="FILE",
                       help="SQLite file of idempotency keys and outcomes (default "
                            "<cache dir>/tools.sqlite3)")
    tools.add_argument("--trace-file", dest="trace_file", type=Path, metavar="FILE",
                       help="append each request's OpenTelemetry span as a JSON line")
    records = serve.add_argument_group("records")
    records.add_argument("--log-format", dest="log_format", choices=["text", "json"],
                         help="text (default) or one JSON object per line")
    records.add_argument("--audit-log", dest="audit_log", type=Path, metavar="FILE",
                         help="write one JSON line per tool-call decision to FILE")
    records.add_argument("--audit-log-max-bytes", dest="audit_log_max_bytes", type=int,
                         help="rotate the audit log at this size (default 64 MiB)")
    records.add_argument("--audit-log-backups", dest="audit_log_backups", type=int,
                         help="rotated audit files kept: FILE.1 ... FILE.N (default 5)")


def _settings(args: argparse.Namespace, names: tuple[str, ...]) -> Settings:
    given = {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}
    return Settings(**given)


def _fetch_model(args: argparse.Namespace) -> int:
    from server.model_store import ensure_embedded_model

    path = ensure_embedded_model(args.cache_dir)
    print(path)
    return 0


def _snapshot(args: argparse.Namespace) -> int:
    import json

    from contracts import ContractError
    from server.api.app import load_contracts

    try:
        registry = load_contracts(args.contracts or ["contracts.examples"])
    except ContractError as exc:
        return _fail(str(exc))
    args.out.mkdir(parents=True, exist_ok=True)
    for contract in registry:
        path = args.out / f"{contract.name}.json"
        path.write_text(json.dumps(contract.snapshot(), indent=2, ensure_ascii=False) + "\n")
        print(path)
    return 0


def _eval(args: argparse.Namespace) -> int:
    from server.eval import ScenarioError, run

    try:
        return run(args)
    except ScenarioError as exc:
        return _fail(str(exc))


def _serve(args: argparse.Namespace) -> int:
    from contracts import ContractError
    from server.api.app import create_app, load_contracts, open_audit_log
    from server.api.gate import RequestIdFilter
    from server.api.serving import serve
    from server.engines.factory import EngineConfigError, build_engine, check_config
    from server.execution import PolicyFileError, load_policy
    from server.formats.base import UnsupportedFormat
    from server.formats.detect import check_setting
    from server.identity import KeyFileError, KeyRing
    from server.records import configure_logging

    names = tuple(n for n in Settings.model_fields if hasattr(args, n))
    try:
        settings = _settings(args, names)
        registry = load_contracts(settings.contracts)
        keys = KeyRing.load(settings.api_keys_file) if settings.api_keys_file else None
        policy = load_policy(settings.policy, registry) if settings.policy else None
        check_config(settings)  # fail here with one line, not deep inside the lifespan
        check_setting(settings.model_format, grammar_backend=settings.grammar_backend)
    except ValidationError as exc:
        first = exc.errors()[0]
        return _fail(f"invalid setting {'.'.join(map(str, first['loc']))}: {first['msg']}")
    except (EngineConfigError, ContractError, KeyFileError, PolicyFileError,
            UnsupportedFormat) as exc:
        return _fail(str(exc))
    try:
        audit = open_audit_log(settings) if settings.audit_log is not None else None
    except OSError as exc:  # its folder cannot be made, or the file cannot be written
        return _fail(f"cannot open the audit log {str(settings.audit_log)!r}: "
                     f"{exc.strerror or exc}")
    configure_logging(args.log_level, settings.log_format, RequestIdFilter())
    if settings.log_format == "json":
        _libraries_log_through_root()
    log = logging.getLogger("strictcall.api")
    if keys is not None:
        log.info("API keys on: %d key(s)", len(keys))
    elif settings.requests_per_minute or settings.tokens_per_minute:
        log.warning("rate limits are per API key: without --api-keys they do not apply")
    if audit is not None:
        log.info("audit log: %s", settings.audit_log)
    if policy is not None:
        log.info("tool policy: %s (%d rules, default %s)", settings.policy, len(policy.rules),
                 policy.default)
    serve(create_app(settings, build_engine, registry, keys=keys, audit=audit,
                     tool_policy=policy), settings, log_level=args.log_level)
    return 0


def _libraries_log_through_root() -> None:
    """With JSON logs every line must be JSON: transformers' own stderr handler and its
    progress bars (loading weights) would write plain text between them."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.disable_default_handler()
    hf_logging.enable_propagation()


def _fail(message: str) -> int:
    print(f"strictcall: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
