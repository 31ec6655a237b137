"""One OpenTelemetry trace per request, its decisions as span events:

    tool_selection_set_built  which tools entered the prompt and grammar, and why
    policy_decision           per offered tool (or invoked one): the decision and its rule
    tool_call_decoded         a call as the model wrote it (name only: arguments stay out)
    validated / repaired / rejected   its post-decode checks
    executed                  an invoke's normalized outcome

Spans go to the tracer provider given to the app (tests read them from the SDK's
in-memory exporter), else to OpenTelemetry's global one (a no-op unless the process set
one up), and with `--trace-file FILE` to a JSON-lines file. Traces are the operator's record:
hidden tools
appear in them (as in the audit log), never in a response or an error."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode, TracerProvider

_Attribute = str | bool | int | float | tuple[str, ...]


class Tracing:
    def __init__(self, provider: TracerProvider | None = None) -> None:
        self._tracer = trace.get_tracer("strictcall", tracer_provider=provider)

    def start(self, name: str, *, request_id: str | None, **attributes: Any) -> RequestTrace:
        span = self._tracer.start_span(name, attributes=_attributes(
            {"strictcall.request_id": request_id, **attributes}))
        return RequestTrace(span)


class RequestTrace:
    """The span of one request; `end` may be called more than once (the first counts)."""

    def __init__(self, span: Span) -> None:
        self.span = span
        self._ended = False

    def event(self, name: str, **attributes: Any) -> None:
        if not self._ended:
            self.span.add_event(name, _attributes(attributes))

    def end(self, *, error: str | None = None) -> None:
        if self._ended:
            return
        if error is not None:
            self.span.set_status(Status(StatusCode.ERROR, error))
        self.span.end()
        self._ended = True


def _attributes(values: Mapping[str, Any]) -> dict[str, _Attribute]:
    """OpenTelemetry takes scalars and lists of scalars: anything else as JSON."""
    out: dict[str, _Attribute] = {}
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(value, (str, bool, int, float)):
            out[key] = value
        elif isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
            out[key] = tuple(value)
        else:
            out[key] = json.dumps(value, ensure_ascii=False, default=str)
    return out


def file_provider(path: Path) -> tuple[TracerProvider, TextIO]:
    """A provider that writes each finished span as one JSON line to `path` (append); the
    caller closes the returned file after shutting the provider down."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider as SdkProvider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

    path.parent.mkdir(parents=True, exist_ok=True)
    out = path.open("a", encoding="utf-8")
    provider = SdkProvider(resource=Resource.create({"service.name": "strictcall"}))
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(
        out=out, formatter=lambda span: span.to_json(indent=None) + "\n")))
    return provider, out
