"""A grammar spec as vLLM's structured-outputs fields, shared by the embedded vLLM engine
and the upstream one (which must not import what the embedded engine needs)."""

from __future__ import annotations

import functools
import json

from grammars import GrammarSpec, TaggedSpec


@functools.lru_cache(maxsize=1024)
def structured_outputs(spec: GrammarSpec) -> dict[str, str]:
    """The spec as vLLM's StructuredOutputsParams fields (read only; remembered per spec,
    so a request does not re-serialize its schema). Deterministic text: vLLM's grammar
    cache is keyed by it, so warming with the same spec makes requests hits."""
    if isinstance(spec, TaggedSpec):
        # Not key-sorted: a JSON Schema's property order is the order the grammar writes.
        return {"structural_tag": json.dumps(spec.structural_tag())}
    return {"json": json.dumps(spec.json_schema(), separators=(",", ":"))}
