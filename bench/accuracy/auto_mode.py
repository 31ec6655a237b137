"""tool_choice="auto" on the embedded model through a real server and the `openai` client:
how often it calls a tool when one fits (BFCL simple_python), how often when none does (prompts
written for this benchmark), and whether every emitted call is valid (it must be: 100%).

    .venv/bin/python -m bench.accuracy.auto_mode [--fit 100] [--model DIR]
"""

from __future__ import annotations

import argparse
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

import jsonschema
import openai
from openai.types.chat import (
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionMessageParam,
    ChatCompletionToolUnionParam,
)

from bench.common.results_file import add_save_flag, save
from grammars import bfcl_to_json_schema
from server.process import ServerProcess

BFCL = (Path(__file__).resolve().parents[2].parent
        / "shared/evaldata/bfcl/BFCL_v4_simple_python.json")
MODEL = "bench-model"

# Requests no BFCL simple_python tool can serve: small talk, writing, opinions, advice.
NO_FIT = [
    "Hi! How are you today?", "Thank you so much for your help.", "Tell me a joke about cats.",
    "Write a haiku about autumn leaves.", "What is your name?", "Good morning!",
    "Can you recommend a good novel for the summer?", "What does the word 'serendipity' mean?",
    "Write a short poem about the sea.", "How do I stay motivated when studying?",
    "What's a nice name for a golden retriever puppy?", "Say something encouraging.",
    "Describe the smell of rain.", "What is the meaning of life, in your opinion?",
    "Give me three tips for a job interview.", "Why do people enjoy music?",
    "Write a two-line birthday message for my sister.", "What is your favorite color?",
    "How should I apologize to a friend?", "Suggest a fun weekend activity for a family.",
    "Explain what a metaphor is.", "Tell me a fun fact about penguins.",
    "What should I cook for a romantic dinner?", "How can I sleep better at night?",
    "Write a limerick about a forgetful wizard.", "Is it better to read books or watch films?",
    "What are some good habits for a morning routine?", "Can you cheer me up?",
    "Describe a sunset over the mountains.", "What makes a good friend?",
    "Give me a riddle.", "How do I politely decline an invitation?",
    "Write a slogan for a lemonade stand.", "What do you think about rainy days?",
    "Suggest a name for my new bakery.", "How do I start learning to draw?",
    "Tell me a short bedtime story.", "What's a good way to relax after work?",
    "Write a thank-you note to my teacher.", "Why is kindness important?",
    "Describe your ideal vacation.", "What are good conversation starters at a party?",
    "Give me a compliment.", "How can I be more creative?",
    "Write a tongue twister.", "What is friendship?", "Say goodbye in a funny way.",
    "What should I name my houseplant?", "Tell me something interesting about the moon's myths.",
    "How do I make small talk with a neighbor?", "Write a motivational quote.",
    "What is your opinion on pineapple on pizza?",
]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--fit", type=int, default=100, help="BFCL questions to ask")
    p.add_argument("--no-fit", type=int, default=len(NO_FIT), help="no-fit prompts to ask")
    p.add_argument("--auto-tools", default="decide", choices=["decide", "trigger"])
    p.add_argument("--model")
    p.add_argument("--max-tokens", type=int, default=200)
    add_save_flag(p)
    args = p.parse_args(argv)
    questions = [json.loads(line) for line in BFCL.open()]
    fit = questions[: args.fit]
    # Each no-fit prompt gets the tools of a BFCL question: real tools that do not fit it.
    no_fit = [(prompt, questions[i]["function"])
              for i, prompt in enumerate(NO_FIT[: args.no_fit])]
    server_args = ["--served-model-name", MODEL, "--auto-tools", args.auto_tools]
    server_args += ["--model", args.model] if args.model else []
    with ServerProcess(*server_args) as server:
        client = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="unused",
                               max_retries=0, timeout=600)
        with ThreadPoolExecutor(4) as pool:
            fit_rows = list(pool.map(lambda q: {"prompt": q["id"], **ask(
                client, q["question"][0], q["function"], args.max_tokens)}, fit))
            none_rows = list(pool.map(lambda pf: {"prompt": pf[0], **ask(
                client, [{"role": "user", "content": pf[0]}], pf[1], args.max_tokens)},
                no_fit))
    found = {"auto_tools": args.auto_tools,
             "model": Path(args.model).name if args.model else "smollm2-135m-instruct",
             "when_a_tool_fits": summarize(fit_rows),
             "when_no_tool_fits": summarize(none_rows),
             "rows": {"fit": fit_rows, "no_fit": none_rows}}
    print(json.dumps({k: v for k, v in found.items() if k != "rows"}, indent=1))
    if args.save:
        save("auto-mode", found, argv)
    return 0


def ask(client: openai.OpenAI, messages: list[ChatCompletionMessageParam],
        functions: list[dict[str, Any]], max_tokens: int) -> dict[str, Any]:
    tools = cast(list[ChatCompletionToolUnionParam],
                 [{"type": "function", "function": f} for f in functions])
    schemas = {f["name"]: bfcl_to_json_schema(f["parameters"]) for f in functions}
    resp = client.chat.completions.create(model=MODEL, messages=messages, tools=tools,
                                          tool_choice="auto", max_tokens=max_tokens)
    choice = resp.choices[0]
    calls = cast(list[ChatCompletionMessageFunctionToolCall], choice.message.tool_calls or [])
    valid = 0
    for call in calls:
        try:
            jsonschema.validate(json.loads(call.function.arguments), schemas[call.function.name])
            valid += 1
        except (KeyError, ValueError, jsonschema.ValidationError):
            pass
    return {"finish": choice.finish_reason, "calls": len(calls), "valid_calls": valid,
            "tools": [c.function.name for c in calls],
            "tokens": resp.usage.completion_tokens if resp.usage else None}


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    called = sum(r["finish"] == "tool_calls" for r in rows)
    calls = sum(r["calls"] for r in rows)
    return {"prompts": n, "called_a_tool_rate": round(called / n, 3),
            "answered_in_text_rate": round(sum(r["finish"] == "stop" for r in rows) / n, 3),
            "cut_off_rate": round(sum(r["finish"] == "length" for r in rows) / n, 3),
            "emitted_calls": calls, "valid_call_rate": round(
                sum(r["valid_calls"] for r in rows) / calls, 3) if calls else None}


if __name__ == "__main__":
    raise SystemExit(main())
