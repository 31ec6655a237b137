"""Tool contracts: Pydantic models that are the single source of a tool's grammar, its
post-decode validation and its repair feedback. A leaf package: imports pydantic and the
standard library only, never `server` or `grammars`."""
