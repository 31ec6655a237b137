"""Accuracy: BFCL's AST categories (bfcl, beside llama-server: bfcl_peer), JSON Schema
coverage and compliance (schemas), what goes into a JSON answer's prompt (schema_prompt),
tool selection, contract repair, tool_choice auto and the runaway guards."""

# strictcall-bench NAME -> this package's module with a `main(argv) -> int`
BENCHMARKS = {
    "bfcl": "bfcl",
    "bfcl-peer": "bfcl_peer",
    "schemas": "schemas",
    "schema-prompt": "schema_prompt",
    "tool-selection": "tool_selection",
    "contract-repair": "contract_repair",
    "auto-mode": "auto_mode",
    "runaway": "runaway",
}
