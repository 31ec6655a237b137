"""Contract validity and repair on a fixed prompt set, through a real server and the `openai`
client: first-attempt validity, repair success rate, mean attempts, 422 fallback rate.

    .venv/bin/python -m bench.accuracy.contract_repair [--model DIR] [--attempts 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any, cast

import openai
from openai.types.chat import ChatCompletionMessageFunctionToolCall

from bench.common.results_file import add_save_flag, save
from server.process import ServerProcess

MODEL = "bench-model"
# (tool, prompt): a fixed set; several ask for things the contract forbids on purpose.
PROMPTS = [
    ("open_dispute", "I was charged twice: 1 200,50 rub yesterday on my card ending 4417."),
    ("open_dispute", "Card 9921: a payment of 35.99 on 2026-11-20 was fraud."),
    ("open_dispute", "My card 3310 was charged 990 rub today but the parcel never arrived."),
    ("open_dispute", "Duplicate charge of 120.00 on 2026-11-25, card 7781, original OP-551200."),
    ("open_dispute", "Card 4417 was charged 15000 instead of 1500 on 2026-11-27."),
    ("reissue_card", "Reissue my card 4417, I will pick it up in Kazan at branch 101."),
    ("reissue_card", "I live in Moscow, please reissue card 5512 to branch 102."),
    ("reissue_card", "Card 8800 is broken, send a new one to Novosibirsk branch 201."),
    ("reissue_card", "Reissue card 1234 in Saint Petersburg, branch 203 please."),
    ("search_products", "Find a lego set for kids under 40."),
    ("search_products", "Show me science fiction books."),
    ("search_products", "I need a winter jacket, at most 120 dollars."),
    ("search_products", "Cheap kitchen knives for my home."),
    ("check_access_request_status", "What is the status of access request AR-004217?"),
    ("check_access_request_status", "Did my access request AR-120001 get approved?"),
    ("create_support_ticket", "Open an ops ticket: the VPN is down since 9am."),
    ("create_support_ticket", "Security issue: a phishing email reached the finance team."),
    ("create_support_ticket", "Support: customer cannot reset password on the portal."),
]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model")
    p.add_argument("--attempts", type=int, default=2, help="repair attempts per call")
    p.add_argument("--max-tokens", type=int, default=200)
    add_save_flag(p)
    args = p.parse_args(argv)
    server_args = ["--served-model-name", MODEL, "--contracts", "contracts.examples",
                   "--repair-attempts", str(args.attempts)]
    if args.model:
        server_args += ["--model", args.model]
    with ServerProcess(*server_args) as server:
        client = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="unused",
                               max_retries=0, timeout=600)
        rows = [_ask(client, tool, prompt, args.max_tokens) for tool, prompt in PROMPTS]
    summary = _report(rows, args)
    if args.save:
        save("contract-repair", {"summary": summary, "rows": rows}, argv)
    return 0


def _ask(client: openai.OpenAI, tool: str, prompt: str, max_tokens: int) -> dict[str, Any]:
    start = time.perf_counter()
    try:
        resp = client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens,
            tools=[{"type": "function", "function": {"name": tool}}], tool_choice="required",
            extra_headers={"X-Tenant-Id": "bench"})
    except openai.UnprocessableEntityError as exc:
        body = exc.response.json()
        return {"tool": tool, "outcome": "422", "attempts": len(body["attempts"]),
                "seconds": time.perf_counter() - start}
    choice = resp.choices[0]
    if choice.finish_reason == "length":
        return {"tool": tool, "outcome": "cut_off", "attempts": 0,
                "seconds": time.perf_counter() - start}
    extension = cast(dict[str, Any], resp.model_extra).get("strictcall") or {}  # extra="allow"
    if "needs_input" in extension:  # a question instead of a value nobody gave
        return {"tool": tool, "outcome": "needs_input", "attempts": 0,
                "seconds": time.perf_counter() - start,
                "asked": [m["field"] for m in extension["needs_input"].get("missing", [])]}
    report = extension["contracts"][0]
    calls = cast(list[ChatCompletionMessageFunctionToolCall], choice.message.tool_calls)
    return {"tool": tool, "outcome": "repaired" if report["repaired"] else "first_attempt",
            "attempts": report["attempts"], "seconds": time.perf_counter() - start,
            "arguments": calls[0].function.arguments}


def _report(rows: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    n = len(rows)
    count = {k: sum(r["outcome"] == k for r in rows)
             for k in ("first_attempt", "repaired", "needs_input", "422", "cut_off")}
    needed_repair = count["repaired"] + count["422"]
    decoded = [r for r in rows if r["outcome"] not in ("cut_off", "needs_input")]
    summary = {
        "prompts": n, "repair_attempts_allowed": args.attempts,
        "first_attempt_valid_rate": round(count["first_attempt"] / n, 3),
        "repair_success_rate": round(count["repaired"] / needed_repair, 3)
        if needed_repair else None,
        "mean_attempts": round(statistics.mean(r["attempts"] for r in decoded), 2)
        if decoded else None,
        "fallback_422_rate": round(count["422"] / n, 3),
        "cut_off_rate": round(count["cut_off"] / n, 3),
        "seconds_per_call_median": round(statistics.median(r["seconds"] for r in rows), 2),
        **{f"count_{k}": v for k, v in count.items()},
    }
    for row in rows:
        print(json.dumps({k: (round(v, 2) if isinstance(v, float) else v)
                          for k, v in row.items()}, ensure_ascii=False))
    print(json.dumps(summary, indent=1))
    return summary


if __name__ == "__main__":
    raise SystemExit(main())
