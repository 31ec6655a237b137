"""The accuracy comparisons with llama.cpp's `llama-server` on a real model (the same
GGUF, the same threads): BFCL AST per category (bench/accuracy/bfcl_peer.py) and BFCL multi-turn
missing-parameter turns (bench/dialogue/bfcl_missing.py). Each headline names its denominators."""

from __future__ import annotations

from typing import Any

from bench.report.page_parts import Rendered, table


def bfcl_peer(results: dict[str, Any]) -> Rendered:
    rows = results["rows"]
    by = {(r["system"], r["category"]): r for r in rows}
    categories = list(dict.fromkeys(r["category"] for r in rows))
    systems = list(dict.fromkeys(r["system"] for r in rows))
    def side(system: str) -> str:
        got = [by[(system, c)] for c in categories if (system, c) in by]
        return (f"{system} AST-correct {'/'.join(str(r['ast_correct']) for r in got)}, "
                f"{sum(r['invalid_returned'] for r in got)} invalid returned, "
                f"{sum(r['cut_off'] for r in got)} of {sum(r['n'] for r in got)} cut off")
    return Rendered(sections=[table(rows), ""], headline=(
        f"{results['model']}, {results['threads']} thread, forced calls, {rows[0]['n']} per "
        f"category ({', '.join(categories)}): "
        + "; ".join(side(s) for s in systems)))


def bfcl_missing(results: dict[str, Any]) -> Rendered:
    rows = results["rows"]
    # Runs before the judge read numbers counted only strings nobody wrote.
    judged = "value" if results.get("invented_judge") == "strings and numbers" else "string"

    def side(r: dict[str, Any]) -> str:
        grounded = {"on": "strings", "values": "strings+numbers", "off": "nothing"}
        who = r["system"] if r["system"] == "llama-server" else \
            f"{grounded.get(r['grounding'], r['grounding'])} grounded"
        rest = "".join(f", {r[k]} {label}" for k, label in (
            ("invented", f"with a {judged} nobody gave"), ("call_as_text", "as text"),
            ("cut_off", "cut off")) if r[k])
        return f"{who} {r['question']}/{r['n']} ({r['called']} called{rest})"
    return Rendered(sections=[table(rows), ""], headline=(
        f"{results['model']}, asked where a value is missing (the right answer): StrictCall "
        + "; ".join(side(r) for r in rows)))
