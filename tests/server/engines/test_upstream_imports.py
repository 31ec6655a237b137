"""`--engine upstream` needs neither vLLM, torch, llama.cpp nor xgrammar in StrictCall's
own Python: a child process where importing any of them fails serves a forced tool call, a
JSON answer and a stream through the whole pipeline (against a fake vLLM server)."""

from __future__ import annotations

import json
import subprocess
import sys

from server.process import ROOT

CHILD = r'''
import json, sys
for blocked in ("torch", "vllm", "llama_cpp", "xgrammar"):
    sys.modules[blocked] = None  # importing it now raises ImportError
from fastapi.testclient import TestClient
from server.api.app import create_app
from server.engines.upstream import UpstreamEngine, UpstreamOptions
from server.settings import Settings
from tests.server.engines.fake_vllm import FakeVllm, fleet
from transformers import AutoTokenizer

model_dir = sys.argv[1]

def reply(body):
    tag = json.loads(body["structured_outputs"]["structural_tag"])
    schema = tag["format"]["json_schema"]
    if schema["type"] == "array":
        return '[{"name": "get_weather", "arguments": {"city": "Oslo"}}]'
    return '{"city": "Oslo"}'

fake = FakeVllm(AutoTokenizer.from_pretrained(model_dir), reply=reply)
transport = fleet({"http://vllm:8000": fake})
settings = Settings(engine="upstream", upstream=["http://vllm:8000"], served_model_name="m")
app = create_app(settings, lambda s: UpstreamEngine(
    model_dir, urls=s.upstream, options=UpstreamOptions(), model_name="m",
    transport=transport, probe_transport=transport))
tool = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "maxLength": 30}},
    "required": ["city"]}}}
ask = [{"role": "user", "content": "Weather in Oslo?"}]
out = {}
with TestClient(app) as client:
    call = client.post("/v1/chat/completions", json={
        "model": "m", "messages": ask, "tools": [tool],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}).json()
    out["call"] = call["choices"][0]["message"]["tool_calls"][0]["function"]
    answer = client.post("/v1/chat/completions", json={
        "model": "m", "messages": ask, "response_format": {"type": "json_schema",
        "json_schema": {"name": "w", "schema": tool["function"]["parameters"]}}}).json()
    out["json"] = answer["choices"][0]["message"]["content"]
    with client.stream("POST", "/v1/chat/completions", json={
            "model": "m", "messages": ask, "stream": True, "response_format": {
            "type": "json_schema", "json_schema": {"name": "w",
            "schema": tool["function"]["parameters"]}}}) as streamed:
        out["stream"] = [line for line in streamed.iter_lines() if line.startswith("data:")]
    out["health"] = client.get("/health").json()
out["loaded"] = sorted(m for m in ("torch", "vllm", "llama_cpp", "xgrammar")
                       if sys.modules.get(m) is not None)
print(json.dumps(out))
'''


def test_the_upstream_engine_serves_without_torch_vllm_llamacpp_or_xgrammar(model_dir):
    done = subprocess.run([sys.executable, "-c", CHILD, str(model_dir)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["loaded"] == []
    assert out["call"]["name"] == "get_weather"
    assert json.loads(out["call"]["arguments"]) == {"city": "Oslo"}
    assert json.loads(out["json"]) == {"city": "Oslo"}
    assert out["stream"][-1] == "data: [DONE]" and len(out["stream"]) > 3
    assert out["health"]["status"] == "ok"
    assert out["health"]["engine"]["jump_forward_in_effect"] == 0
