"""Settings -> engine, with configuration errors stated in one line."""

from __future__ import annotations

from server.engines.base import Engine
from server.model_store import ModelNotFoundError, resolve_model
from server.settings import Settings


class EngineConfigError(Exception):
    pass


def check_config(settings: Settings) -> None:
    """Cheap checks before anything heavy loads; also fetches the embedded model if needed."""
    import torch

    if settings.device.startswith("cuda") and not torch.cuda.is_available():
        raise EngineConfigError(f"--device {settings.device} was asked for, but torch sees no "
                                "CUDA GPU; use --device cpu or auto")
    if settings.device not in ("auto", "cpu") and not settings.device.startswith("cuda"):
        raise EngineConfigError(f"unknown --device {settings.device!r}; use auto, cpu or cuda[:N]")
    try:
        resolve_model(settings.model, settings.cache_dir)
    except ModelNotFoundError as exc:
        raise EngineConfigError(str(exc)) from None


def build_engine(settings: Settings) -> Engine:
    from server.engines.torch_engine import TorchEngine

    model_dir = resolve_model(settings.model, settings.cache_dir)
    return TorchEngine(model_dir, device=settings.device, threads=settings.threads,
                       max_batch=settings.max_batch,
                       model_name=settings.served_model_name or model_dir.name)
