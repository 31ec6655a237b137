"""/metrics of the real server after real requests, read with prometheus_client's own
parser: every series the README documents is there and counted."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.live import MODEL

pytestmark = pytest.mark.slow

SERIES = {  # family name as the parser reports it -> a sample that must be > 0
    "strictcall:requests": "strictcall:requests_total",
    "strictcall:e2e_request_latency_seconds": "strictcall:e2e_request_latency_seconds_count",
    "strictcall:time_to_first_token_seconds": "strictcall:time_to_first_token_seconds_count",
    "strictcall:time_per_output_token_seconds":
        "strictcall:time_per_output_token_seconds_count",
    "strictcall:request_queue_time_seconds": "strictcall:request_queue_time_seconds_count",
    "strictcall:prompt_tokens": "strictcall:prompt_tokens_total",
    "strictcall:generation_tokens": "strictcall:generation_tokens_total",
    "strictcall:request_success": "strictcall:request_success_total",
    "strictcall:contract_calls": "strictcall:contract_calls_total",
    "strictcall_grammar_compile_seconds": "strictcall_grammar_compile_seconds_count",
    "strictcall_grammar_cache_hits": "strictcall_grammar_cache_hits_total",
    "strictcall_grammar_cache_misses": "strictcall_grammar_cache_misses_total",
    "strictcall_requests_rejected": "strictcall_requests_rejected_total",
}
GAUGES = ("strictcall:num_requests_running", "strictcall:num_requests_waiting",
          "strictcall_grammar_cache_entries")


def test_metrics_after_real_requests(live_server, live_client):
    live_client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Name a colour."}], max_tokens=8)
    live_client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Find lego toys."}],
        tools=[{"type": "function", "function": {"name": "search_products"}}],
        tool_choice="required")
    httpx.post(f"{live_server}/v1/chat/completions", json={"model": "nope", "messages": []})
    text = httpx.get(f"{live_server}/metrics").text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    samples = {s.name: s for f in families.values() for s in f.samples}
    for family, sample in SERIES.items():
        assert family in families, f"{family} missing from /metrics"
        found = [s for s in families[family].samples if s.name == sample]
        assert found and sum(s.value for s in found) > 0, f"{sample} not counted"
    for gauge in GAUGES:
        assert gauge in families
    ok = [s for s in families["strictcall:requests"].samples
          if s.labels == {"model_name": MODEL, "api": "chat_completions", "outcome": "success",
                          "status": "200"}]
    assert ok and ok[0].value >= 2
    assert any(s.labels.get("outcome") == "client_error"
               for s in families["strictcall:requests"].samples)
    assert samples  # parsed at all
