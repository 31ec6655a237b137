"""`strictcall` command line: `serve` and `fetch-model`."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from pydantic import ValidationError

from server.settings import Settings


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "fetch-model":
        return _fetch_model(args)
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
    serve.add_argument("--device", help="auto (default), cpu, cuda, cuda:N")
    serve.add_argument("--threads", type=int, help="CPU compute threads (default 1)")
    serve.add_argument("--max-batch", dest="max_batch", type=int,
                       help="requests decoded together (default 8)")
    serve.add_argument("--cache-dir", dest="cache_dir", type=Path)
    serve.add_argument("--log-level", default="info")
    fetch = sub.add_parser("fetch-model", help="download and convert the embedded model")
    fetch.add_argument("--cache-dir", dest="cache_dir", type=Path)
    return parser


def _settings(args: argparse.Namespace, names: tuple[str, ...]) -> Settings:
    given = {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}
    return Settings(**given)


def _fetch_model(args: argparse.Namespace) -> int:
    from server.model_store import ensure_embedded_model

    path = ensure_embedded_model(args.cache_dir)
    print(path)
    return 0


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from server.api.app import create_app
    from server.engines.factory import EngineConfigError, build_engine, check_config

    names = ("host", "port", "model", "served_model_name", "device", "threads", "max_batch",
             "cache_dir")
    try:
        settings = _settings(args, names)
        check_config(settings)  # fail here with one line, not deep inside the lifespan
    except ValidationError as exc:
        first = exc.errors()[0]
        return _fail(f"invalid setting {'.'.join(map(str, first['loc']))}: {first['msg']}")
    except EngineConfigError as exc:
        return _fail(str(exc))
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    uvicorn.run(create_app(settings, build_engine), host=settings.host, port=settings.port,
                log_level=args.log_level)
    return 0


def _fail(message: str) -> int:
    print(f"strictcall: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
