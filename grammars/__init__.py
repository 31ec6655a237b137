"""Grammars: JSON Schema -> compiled xgrammar grammar -> per-request token masks.

A leaf package: it imports neither `server` nor `contracts`.
"""

from grammars.budgets import Budget, BudgetExceeded
from grammars.backend import CompiledGrammar, Matcher, XgrammarBackend
from grammars.cache import CacheKey, CacheStats, GrammarCache, Lookup
from grammars.dialect import bfcl_to_json_schema
from grammars.errors import GrammarError, InvalidSchemaError, UnsupportedSchemaError
from grammars.specs import (GrammarSpec, JsonSchemaSpec, TextOrToolCallsSpec, ToolCallsSpec,
                            ToolSpec, canonical_json, check_schema)

__all__ = [
    "Budget", "BudgetExceeded", "CacheKey", "CacheStats", "CompiledGrammar", "GrammarCache", "GrammarError", "GrammarSpec",
    "InvalidSchemaError", "JsonSchemaSpec", "Lookup", "Matcher", "TextOrToolCallsSpec", "ToolCallsSpec", "ToolSpec",
    "UnsupportedSchemaError", "XgrammarBackend", "bfcl_to_json_schema", "canonical_json",
    "check_schema",
]
