"""The parts of xgrammar this package uses, importable where torch is not.

xgrammar 0.2.9's package `__init__` imports `matcher`, `testing` and `contrib.hf`, and each
imports torch at its top, for bitmask helpers and kernels that take torch tensors. The
compiler, tokenizer info, structural tags and the C++ matcher itself need no torch: their
bitmasks are any DLPack array (numpy's here). A llama.cpp server never holds a torch tensor,
and importing torch costs it about 200 MiB of resident memory, so this module loads those
parts without running the package `__init__`:

- the `xgrammar` package module is created from its spec, its submodules imported by name;
- any other name asked of the package (`xgrammar.allocate_token_bitmask`, `from xgrammar
  import GrammarMatcher`) runs the real `__init__` then, in the same module object, so code
  that imports xgrammar as usual in the same process gets the whole package.

Only `new_matcher` reaches past xgrammar's public API (its `GrammarMatcher` class lives in
the torch-importing `matcher` module): it builds the C++ matcher that class wraps, with the
same arguments. `tests/grammars/test_xgrammar_parts.py` checks it against the public class,
and that a process that loads these parts does not import torch.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType
from typing import Any

# Imported in this order: the exception types and the native library first, as the
# package's own `__init__` does, then what uses them.
_PARTS = ("exception", "load_binding", "base", "structural_tag", "grammar", "tokenizer_info",
          "compiler", "openai_tool_call_schema", "builtin_structural_tag")


def _package() -> ModuleType:
    loaded = sys.modules.get("xgrammar")
    if loaded is not None:
        return loaded
    spec = importlib.util.find_spec("xgrammar")
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError("No module named 'xgrammar'", name="xgrammar")
    package = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def rest_of_package(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        del package.__dict__["__getattr__"]
        loader.exec_module(package)
        return getattr(package, name)

    package.__getattr__ = rest_of_package  # type: ignore[method-assign]
    sys.modules["xgrammar"] = package
    return package


class _Deferred(type):
    """A class that stands for transformers' class of the same name: an instance or subclass
    of it is one of transformers' class, where transformers is imported; before, nothing is
    (nothing can be an instance of a class not yet imported)."""

    def _real(cls) -> type | None:
        loaded = sys.modules.get("transformers")
        return None if loaded is None or loaded is _STAND_IN \
            else getattr(loaded, cls.__name__)

    def __instancecheck__(cls, instance: Any) -> bool:
        real = cls._real()
        return real is not None and isinstance(instance, real)

    def __subclasscheck__(cls, subclass: type) -> bool:
        real = cls._real()
        return real is not None and issubclass(subclass, real)


_STAND_IN = ModuleType("transformers", "a stand-in while xgrammar.tokenizer_info imports")
_STAND_IN.PreTrainedTokenizerBase = _Deferred("PreTrainedTokenizerBase", (), {})  # type: ignore[attr-defined]
_STAND_IN.PreTrainedTokenizerFast = _Deferred("PreTrainedTokenizerFast", (), {})  # type: ignore[attr-defined]


def _import_part(name: str) -> ModuleType:
    """`xgrammar.<name>`. Its `tokenizer_info` imports transformers' two tokenizer base
    classes at its top, only to test a tokenizer against them in `from_huggingface`, and
    importing transformers takes about half a second (it scans every model it knows). Where
    transformers is not imported yet, that module is imported against a stand-in holding
    two `_Deferred` classes, and the stand-in removed after: a llama.cpp server, whose
    tokenizer needs no transformers (server/engines/json_tokenizer.py), never imports it."""
    if name != "tokenizer_info" or "transformers" in sys.modules:
        return importlib.import_module(f"xgrammar.{name}")
    sys.modules["transformers"] = _STAND_IN
    try:
        return importlib.import_module(f"xgrammar.{name}")
    finally:
        if sys.modules.get("transformers") is _STAND_IN:
            del sys.modules["transformers"]


_package()
_modules = {name: _import_part(name) for name in _PARTS}

CompiledGrammar = _modules["compiler"].CompiledGrammar
GrammarCompiler = _modules["compiler"].GrammarCompiler
TokenizerInfo = _modules["tokenizer_info"].TokenizerInfo
get_model_structural_tag = _modules["builtin_structural_tag"].get_model_structural_tag
_core = _modules["base"]._core


def new_matcher(compiled: Any, *, terminate_without_stop_token: bool = False) -> Any:
    """A matcher at the start of `compiled` (an xgrammar `CompiledGrammar`): the C++ object
    `xgrammar.GrammarMatcher(compiled, terminate_without_stop_token=...)` wraps, with the
    methods it forwards (`accept_token(id, debug)`, `fill_next_token_bitmask(mask, row,
    debug)`, `rollback(n)`, `find_jump_forward_tokens()`, `is_terminated()`, ...)."""
    return _core.GrammarMatcher(compiled._handle, None, terminate_without_stop_token, -1, None)
