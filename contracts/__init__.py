"""Tool contracts: Pydantic models that are the single source of a tool's grammar, its
post-decode validation and its repair feedback. A leaf package: imports pydantic and the
standard library only, never `server` or `grammars`.

    from contracts import tool, FromHeader, Violated

    @tool(name="create_ticket", description="Open a support ticket.")
    class CreateTicket(BaseModel):
        title: Annotated[str, Field(max_length=200)]
        tenant_id: Annotated[str, FromHeader("X-Tenant-Id")]
"""

from contracts.catalog import (
                               CatalogEntry,
                               ExecutionSpec,
                               Handler,
                               HttpHandler,
                               Kind,
                               Lifecycle,
                               Partial,
                               Risk,
                               ToolContext,
                               ToolFailed,
)
from contracts.contract import (
                               Contract,
                               ContractError,
                               MissingRuntimeValue,
                               Outcome,
                               allowed_values,
                               contract_of,
                               tool,
)
from contracts.fields import ITEM, FieldValues
from contracts.markers import (
                               ABOUT_KEY,
                               ASK_KEY,
                               CONFIRM_KEY,
                               GROUNDED_KEY,
                               About,
                               Ask,
                               Confirm,
                               FromHeader,
                               Generated,
                               Grounded,
                               Redact,
                               RuntimeSource,
)
from contracts.registry import ContractRegistry
from contracts.violations import Violated, Violation, ViolationCode

__all__ = [
    "CatalogEntry", "ExecutionSpec", "Handler", "HttpHandler", "Kind", "Lifecycle", "Partial",
    "Risk", "ToolContext", "ToolFailed",
    "ABOUT_KEY", "ASK_KEY", "About", "CONFIRM_KEY", "GROUNDED_KEY", "ITEM", "Ask", "Confirm",
    "FieldValues", "Grounded",
    "Contract", "ContractError", "ContractRegistry", "FromHeader", "Generated",
    "MissingRuntimeValue", "Outcome", "Redact", "RuntimeSource", "Violated", "Violation",
    "ViolationCode", "allowed_values", "contract_of", "tool",
]
