"""`--model-format auto`: which family a model is, from its chat template (the strongest
evidence: it is what the model was trained to read and write), then its config's
`model_type`. A model it cannot place gets the generic format, with a warning."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from server.formats.base import ModelFormat, UnsupportedFormat
from server.formats.families import SERVED, FamilyFormat, get_format
from server.formats.smollm2 import NAME as GENERIC

log = logging.getLogger("strictcall.formats")

# (family, markers that must all be in the chat template), most specific first.
TEMPLATE_MARKERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("gemma_4", ("<|tool_call>", "<tool_call|>")),
    ("kimi_k3", ("<|open|>", "<|close|>", "<|sep|>")),
    ("kimi", ("<|tool_calls_section_begin|>", "<|tool_call_begin|>")),
    ("minimax_m3", ("]<]minimax[>[",)),
    ("minimax", ("<minimax:tool_call>",)),
    ("deepseek_v4", ("｜DSML｜", "tool_calls>")),
    ("deepseek_v3_2", ("｜DSML｜", "function_calls>")),
    ("cohere", ("<cofl:tool_call",)),
    ("glm_4_7", ("<tool_call>", "<arg_key>", "<arg_value>")),
    ("harmony", ("<|channel|>", "<|message|>")),
    ("deepseek_r1", ("<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "```json")),
    ("deepseek_v3_1", ("<｜tool▁call▁begin｜>", "<｜tool▁sep｜>")),
    ("qwen_3_coder", ("<function=", "<parameter=")),
    ("mimo", ("<tool_call><function=",)),
    ("exaone", ("[|assistant|]", "<tool_call>")),
    ("qwen_3", ("<|im_start|>", "<tool_call>", "</tool_call>")),
    ("llama", ("<|start_header_id|>", "<|eot_id|>")),
)
# config.json model_type (a GGUF's, from its architecture) -> family, when the template
# says nothing.
MODEL_TYPES = {"gpt_oss": "harmony", "qwen3": "qwen_3", "qwen3_moe": "qwen_3",
               "qwen2": "qwen_3", "deepseek_v3": "deepseek_v3_1", "exaone4": "exaone",
               "mimo": "mimo", "glm4_moe": "glm_4_7", "deepseek_v32": "deepseek_v3_2",
               "kimi_k2": "kimi", "minimax_m2": "minimax", "gemma4": "gemma_4",
               "gemma4_text": "gemma_4"}


def detect(template: str | None, model_type: str | None) -> tuple[str, str]:
    """(format name, why) for a chat template and a config model_type."""
    for family, markers in TEMPLATE_MARKERS:
        if template and all(m in template for m in markers):
            return family, f"its chat template has {', '.join(repr(m) for m in markers)}"
    if model_type in MODEL_TYPES:
        return MODEL_TYPES[model_type], f"its config's model_type is {model_type!r}"
    return GENERIC, ""


def check_setting(name: str, *, grammar_backend: str) -> None:
    """`--model-format`, checked before anything loads: UnsupportedFormat (one line) for a
    name no format answers to, or a family whose grammar needs another backend."""
    if name == "auto":
        return
    try:
        get_format(name)
    except UnsupportedFormat as exc:
        raise UnsupportedFormat(f"--model-format: {exc}") from None
    if name != GENERIC and grammar_backend != "xgrammar":
        raise UnsupportedFormat(f"--model-format {name} needs --grammar-backend xgrammar "
                                "(its structural tags)")


def resolve(name: str, *, model_dir: Path | None, tokenizer: Any) -> ModelFormat:
    """The format to serve: `name`, or with `auto` the detected one (logged with why)."""
    template = _template(tokenizer)
    if name != "auto":
        fmt = get_format(name)
        log.info("model format %s (set by --model-format)", fmt.name)
    else:
        found, why = detect(template, _model_type(model_dir))
        if not why:
            log.warning("model format: could not place this model in a family (no known "
                        "markers in its chat template, model_type %r): serving the generic "
                        "%s format; set --model-format to choose one",
                        _model_type(model_dir), GENERIC)
            return SERVED[GENERIC]
        log.info("model format %s: %s", found, why)
        fmt = get_format(found)
    if isinstance(fmt, FamilyFormat):
        # A template that does not render tools: they are described in the system turn.
        renders = bool(template) and "tools" in (template or "")
        if not renders:
            log.warning("model format %s: the chat template does not render tools; they are "
                        "described in the system turn instead", fmt.name)
        # (Detected: as its template does. Named by --model-format: as the family does.)
        thinks = fmt.thinks and (name != "auto" or template_thinks(template, fmt))
        if fmt.thinks and not thinks:
            log.info("model format %s: no thinking (its chat template has no thinking block, "
                     "as Qwen2.5's and Qwen3's -Instruct-2507 have none): no reasoning pass "
                     "unless a request asks for one", fmt.name)
        fmt = FamilyFormat(fmt.name, thinks=thinks, renders_tools=renders)
    return fmt


# What a chat template that thinks reads or writes, beside its family's own closing marker
# (Qwen3's `enable_thinking`, DeepSeek's and GLM's `reasoning_content`, gpt-oss's
# `thinking`): a family's template without any of them is a model of that family's call
# syntax that does not think (Qwen2.5 and Hermes models write Qwen3's `<tool_call>`).
THINKING_WORDS = ("reasoning_content", "enable_thinking", "thinking")


def template_thinks(template: str | None, fmt: FamilyFormat) -> bool:
    """Whether a model of `fmt`'s family with this chat template thinks (no template: as
    the family does)."""
    if template is None:
        return fmt.thinks
    end = fmt.syntax([]).think_end
    return bool(end and end in template) or any(w in template for w in THINKING_WORDS)


def _template(tokenizer: Any) -> str | None:
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):  # several named templates: the default one
        template = template.get("default") or next(iter(template.values()), None)
    return template if isinstance(template, str) else None


def _model_type(model_dir: Path | None) -> str | None:
    if model_dir is None:
        return None
    try:
        found = json.loads((Path(model_dir) / "config.json").read_text()).get("model_type")
        return found if isinstance(found, str) else None
    except (OSError, ValueError):
        return None
