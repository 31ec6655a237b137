"""Prompt text: OpenAI messages -> the model's chat template, with tools described in the
system prompt (SmolLM2's template does not render `tools`)."""

from __future__ import annotations

import json
from typing import Any, Literal

from server.pipeline.schema_text import SchemaPrompt, render
from server.protocol import AssistantMessage, Content, Message, ToolMessage

# The call syntax SmolLM2-Instruct saw in its function-calling data; the grammar produces
# the JSON list and the opening tag is written into the assistant turn for it.
CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"

TOOLS_INSTRUCTIONS = """You are an expert in composing function calls. You are given a \
question and a set of tools. Call the tool that answers the question, with argument values \
taken from the question.
<tools>
{tools}
</tools>
Answer only with the calls, as a JSON list inside tags:
<tool_call>[{{"name": "tool_name", "arguments": {{"argument": "value"}}}}]</tool_call>"""

# A required or forced call written with less prompt (`--tool-prompt`): the grammar writes
# the tag, the tool's name once chosen, and every key, so the prompt only has to say what
# the tools are for and where the values come from.
SHORT_TOOLS_INSTRUCTIONS = """Call the tool that answers the question, with argument values \
taken from the question. Tools:
{tools}"""

# How tools are written into the prompt for a required or forced call: each as a JSON line
# with its JSON Schema ("full"), as a line with a TypeScript-like argument shape
# ("compact"), or as its name and description only ("none"). The setting adds "auto": none
# for a call forced to a named tool, full where the model chooses (server/pipeline/plan.py).
# Measured: bench/bfcl.py, README.
ToolStyle = Literal["full", "compact", "none"]
ToolPrompt = Literal["auto", ToolStyle]

AUTO_INSTRUCTIONS = """You are an expert in composing functions. You are given a question \
and a set of possible functions. Based on the question, you will need to make one or more \
function/tool calls to achieve the purpose. If none of the functions can be used, answer the \
question yourself in plain text.

You have access to the following tools:
<tools>
{tools}
</tools>

To call tools, answer with this format and no other text:
<tool_call>[{{"name": "func_name1", "arguments": {{"argument1": "value1"}}}}]</tool_call>"""

DECIDE_INSTRUCTIONS = """You are an expert in composing functions. You are given a question \
and a set of possible functions. Based on the question, you will need to make one or more \
function/tool calls to achieve the purpose. If none of the functions can be used, make the \
tool calls an empty list '[]'.
<tools>
{tools}
</tools>
Answer only with the calls, as a JSON list inside tags:
<tool_call>[{{"name": "tool_name", "arguments": {{"argument": "value"}}}}]</tool_call>"""

JSON_INSTRUCTIONS = """Answer only with JSON that matches this JSON Schema:
{schema}"""
COMPACT_JSON_INSTRUCTIONS = """Answer only with a JSON value of this shape:
{schema}"""


def _tool_lines(tools: list[dict[str, Any]]) -> str:
    return "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)


def tools_instructions(tools: list[dict[str, Any]], style: ToolStyle = "full") -> str:
    if style == "full":
        return TOOLS_INSTRUCTIONS.format(tools=_tool_lines(tools))
    lines = []
    for tool in tools:
        about = f": {tool['description']}" if tool.get("description") else ""
        lines.append(f"- {tool['name']}{about}")
        if style == "compact":
            lines.append(f"  arguments: {render(tool['parameters'], 'compact')}")
    return SHORT_TOOLS_INSTRUCTIONS.format(tools="\n".join(lines))


def auto_instructions(tools: list[dict[str, Any]]) -> str:
    return AUTO_INSTRUCTIONS.format(tools=_tool_lines(tools))


def decide_instructions(tools: list[dict[str, Any]]) -> str:
    return DECIDE_INSTRUCTIONS.format(tools=_tool_lines(tools))


def json_instructions(schema: dict[str, Any], style: SchemaPrompt = "raw") -> str | None:
    """What the system turn says about a JSON answer's schema (`style`: schema_text)."""
    text = render(schema, style)
    if text is None:
        return None
    return (JSON_INSTRUCTIONS if style == "raw" else COMPACT_JSON_INSTRUCTIONS).format(
        schema=text)


def template_messages(messages: list[Message], *, instructions: str | None,
                      structured: bool = False) -> list[dict[str, Any]]:
    """The wire messages for the chat template; `instructions` join the system turn.
    Flattened to role/content pairs (the SmolLM2 format writes earlier calls as its JSON
    list), or `structured`: earlier calls as `tool_calls` and results as `tool` messages
    with their call ids, for templates that render them in their family's own syntax."""
    out: list[dict[str, Any]] = []
    for message in messages:
        role = "system" if message.role == "developer" else message.role
        out.append(_structured(message, role) if structured
                   else {"role": role, "content": _render(message)})
    if instructions:
        if out and out[0]["role"] == "system":
            out[0]["content"] = f"{out[0]['content']}\n\n{instructions}"
        else:
            out.insert(0, {"role": "system", "content": instructions})
    return out


def _structured(message: Message, role: str) -> dict[str, Any]:
    out: dict[str, Any] = {"role": role, "content": _text(message.content)}
    if isinstance(message, AssistantMessage) and message.tool_calls:
        out["tool_calls"] = [{"id": c.id, "type": "function", "function": {
            "name": c.function.name, "arguments": _loads_or_raw(c.function.arguments)}}
            for c in message.tool_calls]
    if isinstance(message, ToolMessage):
        out["tool_call_id"] = message.tool_call_id
    return out


def _render(message: Message) -> str:
    text = _text(message.content)
    if isinstance(message, AssistantMessage) and message.tool_calls:
        calls = [{"name": c.function.name, "arguments": _loads_or_raw(c.function.arguments)}
                 for c in message.tool_calls]
        text = f"{text}{CALL_OPEN}{json.dumps(calls, ensure_ascii=False)}{CALL_CLOSE}"
    if isinstance(message, ToolMessage):
        text = f"[result of call {message.tool_call_id}] {text}"
    return text


def _text(content: Content | None) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.text for part in content)


def _loads_or_raw(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except json.JSONDecodeError:
        return arguments
