"""Dialogue: grounded values over hand-written dialogues (grounding), agent loops, BFCL's
multi-turn dialogues scored by state and their missing-parameter turns."""

# strictcall-bench NAME -> this package's module with a `main(argv) -> int`
BENCHMARKS = {
    "grounding": "grounding",
    "agent-loop": "agent_loop",
    "bfcl-multi-turn": "bfcl_multi_turn",
    "bfcl-missing": "bfcl_missing",
}
