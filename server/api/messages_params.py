"""The chat pipeline names chat fields in its errors (`tools[0].function.parameters`); a
Messages client sent Anthropic's (`tools[0].input_schema`): an error's `param` renamed to
the field the client sent, as the Responses adapter does for its own names."""

from __future__ import annotations

import re

from server.errors import ServiceError

_PARAM_NAMES = (
    (re.compile(r"^(tools\[\d+\])\.function\.parameters"), r"\1.input_schema"),
    (re.compile(r"^(tools\[\d+\])\.function\."), r"\1."),
    (re.compile(r"^tool_choice\.function\."), "tool_choice."),
    (re.compile(r"^stop$"), "stop_sequences"),
    (re.compile(r"^max_(completion_)?tokens$"), "max_tokens"),
)


def with_messages_param(error: ServiceError) -> ServiceError:
    """`error`, its `param` renamed to the Messages field the client sent."""
    if error.param:
        for pattern, replacement in _PARAM_NAMES:
            error.param = pattern.sub(replacement, error.param)
    return error
