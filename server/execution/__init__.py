"""The execution layer, beside the pipeline: the tool catalog's policy (who may see, call and
run which tool), per-request tool selection, running validated calls of contracts that
declare a handler (timeouts, retries for reads, idempotency keys for writes, normalized
outcomes), and the OpenTelemetry events of these decisions. It imports contracts and the
shared server modules, never server.api, server.pipeline or server.engines."""

from server.execution.offer import Offer, ToolOffers
from server.execution.policy import DECISIONS, Decision, Principal, Rule, ToolPolicy, Verdict
from server.execution.policy_file import PolicyFileError, load_policy
from server.execution.runner import Execution, OwnerClients, Runner, Status
from server.execution.runtime import contract_runtime, new_call_key, with_call_key
from server.execution.selection import Bm25, Selection, select, tool_text, words
from server.execution.store import (
    IdempotencyStore,
    MemoryStore,
    RecordStore,
    Scope,
    SqliteStore,
    Stored,
)
from server.execution.tracing import RequestTrace, Tracing, file_provider

__all__ = [
    "DECISIONS", "Bm25", "Decision", "Tracing", "Execution", "IdempotencyStore", "MemoryStore",
    "Offer", "OwnerClients", "PolicyFileError", "Principal", "RecordStore", "RequestTrace",
    "Rule", "Runner",
    "Scope",
    "Selection", "SqliteStore", "Status", "Stored", "ToolOffers", "ToolPolicy", "Verdict",
    "contract_runtime", "file_provider", "load_policy", "new_call_key", "select", "tool_text",
    "with_call_key", "words",
]
