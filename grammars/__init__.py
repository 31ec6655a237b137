"""Grammars: JSON Schema -> compiled xgrammar grammar -> per-request token masks.

A leaf package: it imports neither `server` nor `contracts`.
"""

from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

# What the server and the bench use; nothing outside this package imports its modules.
from grammars._walk import iter_schema_nodes
from grammars.backend_types import CompiledGrammar, GrammarBackend, GrammarMatcher, MaskingBackend
from grammars.bridge import BridgedBackend, bridge_demoted, bridge_first, is_bridged, reported
from grammars.budgets import Budget, BudgetExceeded
from grammars.cache import CacheKey, CacheStats, GrammarCache, Lookup
from grammars.dialect import bfcl_to_json_schema
from grammars.diskstore import DiskStore
from grammars.errors import GrammarError, InvalidSchemaError, UnsupportedSchemaError
from grammars.grounded import (
    GROUNDED,
    NOT_GIVEN,
    Narrowing,
    grounding_uses,
    narrowed_schema,
    optional_at,
    required_at,
    schema_pointer,
)
from grammars.json_value import has_surrogate, plain_json
from grammars.keywords import (
    JSON_SCHEMA_READING,
    TIERS,
    VLLM_XGRAMMAR_KEYWORDS,
    Analysis,
    EnforcementReport,
    KeywordTable,
    departures,
    with_policies,
)
from grammars.metaschema import MAX_NESTING, check_json_value, checked_client_schema
from grammars.patterns import ClientRegex, Match, PatternError, PatternTimeout, client_regex
from grammars.policy import DEFAULT_POLICIES, POLICY_FLAGS, GrammarPolicy, PolicyFlag
from grammars.specs import (
    GrammarSpec,
    JsonSchemaSpec,
    StructuralTagSpec,
    TaggedSpec,
    TextOrToolCallsSpec,
    ToolCallsSpec,
    ToolSpec,
    canonical_json,
    check_schema,
)
from grammars.validate import validator_for

if TYPE_CHECKING:
    from grammars.backend import XgrammarBackend, XgrammarMatcher, tokenizer_fingerprint
    from grammars.xgrammar_parts import get_model_structural_tag

BRIDGE = "xgrammar+llguidance"
# Imported on first use: only grammars.backend needs xgrammar, so the schema dialect and
# validator serve where it is not installed (`strictcall-bench serve`).
_BACKEND_NAMES = ("XgrammarBackend", "XgrammarMatcher", "tokenizer_fingerprint")


def __getattr__(name: str) -> Any:
    if name in _BACKEND_NAMES:
        from grammars import backend

        return getattr(backend, name)
    if name == "get_model_structural_tag":  # xgrammar's, loaded without torch
        from grammars import xgrammar_parts

        return xgrammar_parts.get_model_structural_tag
    raise AttributeError(f"module 'grammars' has no attribute {name!r}")


def import_backends() -> None:
    """Import the masking backends' module, and xgrammar's parts with it, now. xgrammar's
    import stands transformers in for a moment (grammars/xgrammar_parts.py): a thread about
    to load a tokenizer through transformers, while another may be importing these, calls
    this first, and waits for that import to end rather than meeting the stand-in."""
    from grammars import backend  # noqa: F401


def make_backend(name: str, tokenizer: Any, *, vocab_size: int,
                 stop_token_ids: list[int]) -> MaskingBackend:
    """The masking grammar backend called `name`: "xgrammar" (default), "llguidance" or
    "outlines"."""
    from grammars.backend import XgrammarBackend

    if name == "xgrammar":
        return XgrammarBackend(tokenizer, vocab_size=vocab_size, stop_token_ids=stop_token_ids)
    if name == "outlines":
        from grammars.outlines_backend import OutlinesBackend

        return OutlinesBackend(tokenizer, vocab_size=vocab_size, stop_token_ids=stop_token_ids)
    if name == "llguidance":
        from grammars.llguidance_backend import LlguidanceBackend

        return LlguidanceBackend(tokenizer, vocab_size=vocab_size, stop_token_ids=stop_token_ids)
    if name == BRIDGE:  # xgrammar, bridged over cold compiles by llguidance
        from grammars.llguidance_backend import LlguidanceBackend

        # The bridge's masks serve a schema's first requests only, until xgrammar's grammar
        # is ready: llguidance without its slices, which would hold 16 MiB for that.
        # Built in a thread of its own, beside xgrammar's and the model's load (ready()).
        builder = ThreadPoolExecutor(1, thread_name_prefix="bridge-llguidance")
        fast: Future[MaskingBackend] = builder.submit(
            LlguidanceBackend, tokenizer, vocab_size=vocab_size,
            stop_token_ids=stop_token_ids, slices=[])
        builder.shutdown(wait=False)
        return BridgedBackend(
            XgrammarBackend(tokenizer, vocab_size=vocab_size, stop_token_ids=stop_token_ids),
            fast)
    raise ValueError(f"unknown grammar backend {name!r}; use xgrammar, llguidance or outlines")


__all__ = [
    "DEFAULT_POLICIES", "JSON_SCHEMA_READING", "POLICY_FLAGS", "TIERS", "VLLM_XGRAMMAR_KEYWORDS",
    "Analysis", "DiskStore", "EnforcementReport", "GrammarPolicy", "KeywordTable", "PolicyFlag",
    "departures", "iter_schema_nodes", "validator_for", "with_policies",
    "BRIDGE", "BridgedBackend", "bridge_demoted", "bridge_first", "is_bridged", "reported",
    "Budget", "BudgetExceeded", "CacheKey", "CacheStats", "CompiledGrammar", "GrammarBackend",
    "GrammarCache", "GrammarError", "GrammarMatcher", "GrammarSpec", "InvalidSchemaError",
    "JsonSchemaSpec", "Lookup", "MaskingBackend", "StructuralTagSpec", "TaggedSpec",
    "TextOrToolCallsSpec", "ToolCallsSpec",
    "ToolSpec", "UnsupportedSchemaError", "XgrammarBackend", "XgrammarMatcher",
    "get_model_structural_tag",
    "bfcl_to_json_schema", "canonical_json", "tokenizer_fingerprint",
    "check_schema", "import_backends", "make_backend",
    "MAX_NESTING", "check_json_value", "checked_client_schema", "has_surrogate", "plain_json",
    "GROUNDED", "NOT_GIVEN", "Narrowing", "grounding_uses", "narrowed_schema", "optional_at",
    "required_at", "schema_pointer",
    "ClientRegex", "Match", "PatternError", "PatternTimeout", "client_regex",
]
