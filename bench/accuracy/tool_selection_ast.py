"""AST accuracy on BFCL `multiple` through a real server, with and without tool selection
(called by `strictcall-bench tool-selection --ast N`)."""

from __future__ import annotations

import json
import sys
from typing import Any, cast

import openai
from openai.types.chat import ChatCompletionMessageFunctionToolCall, ChatCompletionToolUnionParam

from bench.accuracy.bfcl_ast import check
from server.process import ServerProcess

MODEL = "m"


def measure_ast(pairs: list[tuple[dict[str, Any], dict[str, Any]]],
                catalog: dict[str, dict[str, Any]], ks: list[int], *, budget: int,
                max_tokens: int) -> list[dict[str, Any]]:
    everything = [{"type": "function", "function": f} for f in catalog.values()]
    settings: dict[str, tuple[list[dict[str, Any]] | None, dict[str, Any] | None]] = {
        "the question's own functions (BFCL)": (None, None),
        **{f"whole catalog, selection k={k}": (everything, {"select_k": k}) for k in ks},
        f"the catalog's first {budget}": (everything[:budget], None)}
    tally = {label: {"ast": 0, "name": 0, "errors": 0} for label in settings}
    with ServerProcess("--served-model-name", MODEL) as server, openai.OpenAI(
            base_url=f"{server.base_url}/v1", api_key="-", max_retries=0,
            timeout=600) as client:
        for i, (question, answer) in enumerate(pairs):
            print(f"question {i + 1}/{len(pairs)}", file=sys.stderr)
            for label, (tools, options) in settings.items():
                own = [{"type": "function", "function": f} for f in question["function"]]
                calls = _ask(client, question, tools or own, options, max_tokens)
                row = tally[label]
                if calls is None:
                    row["errors"] += 1
                    continue
                row["ast"] += check(calls, answer)
                row["name"] += [n for n, _ in calls] == \
                    [name for call in answer["ground_truth"] for name in call]
    return [{"setting": label, "ast": row["ast"] / len(pairs),
             "name": row["name"] / len(pairs), "errors": row["errors"]}
            for label, row in tally.items()]


def _ask(client: openai.OpenAI, question: dict[str, Any], tools: list[dict[str, Any]],
         options: dict[str, Any] | None,
         max_tokens: int) -> list[tuple[str, dict[str, Any]]] | None:
    try:
        resp = client.chat.completions.create(
            model=MODEL, messages=question["question"][0],
            tools=cast(list[ChatCompletionToolUnionParam], tools),
            tool_choice="required", max_tokens=max_tokens, temperature=0,
            extra_body={"strictcall": options} if options else None)
    except openai.APIStatusError:
        return None
    found = cast(list[ChatCompletionMessageFunctionToolCall],
                 resp.choices[0].message.tool_calls or [])
    return [(c.function.name, json.loads(c.function.arguments)) for c in found]
