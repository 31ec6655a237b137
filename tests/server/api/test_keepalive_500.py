"""An unexpected error inside a route is answered with the 500 problem and the kept-alive
connection stays usable: over a real uvicorn server on 127.0.0.1 (in this process, a
ScriptedEngine behind it), one httpx connection, a failing request, then a good one."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import pytest
import uvicorn

from server.api.app import create_app
from server.engines.scripted import ScriptedEngine
from server.errors import problem_type
from server.settings import Settings

CHAT = {"model": "scripted", "messages": [{"role": "user", "content": "hi"}]}


class Exploding(ScriptedEngine):
    """Fails outside the engine call (no EngineFailure to turn it into a 503) while set."""

    explode = False

    def render_chat(self, messages, **kwargs):
        if self.explode:
            raise RuntimeError("/secret/path/model.bin exploded")
        return super().render_chat(messages, **kwargs)


@pytest.fixture()
def served(model_dir):
    engine = Exploding(model_dir, lambda prompt: "Hello.")
    app = create_app(Settings(served_model_name="scripted"), lambda s: engine)

    async def boom() -> dict:  # a test-only route: fails the plainest way a route can
        raise KeyError("no such thing")

    app.get("/test-only/boom")(boom)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None,
                                           lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}", engine
    server.should_exit = True
    thread.join(timeout=30)


def _local_port(response: httpx.Response) -> int:
    """The client side's port of the connection the response came on."""
    return response.extensions["network_stream"].get_extra_info("client_addr")[1]


@pytest.mark.parametrize("failing", ["route", "pipeline"])
def test_an_unexpected_error_is_a_500_and_the_connection_stays_usable(served, failing):
    base, engine = served
    with httpx.Client(base_url=base, timeout=30) as client:
        if failing == "route":
            bad = client.get("/test-only/boom")
        else:
            engine.explode = True
            bad = client.post("/v1/chat/completions", json=CHAT)
            engine.explode = False
        assert bad.status_code == 500, bad.text
        connection = _local_port(bad)
        assert bad.headers["content-type"].startswith("application/problem+json")
        problem = bad.json()
        assert problem["type"] == problem_type("internal-error")
        assert problem["detail"] == "internal error; the server log has the details"
        assert "secret" not in bad.text and "Traceback" not in bad.text
        assert bad.headers["x-request-id"]  # the log line's id: what to quote to the operator
        assert bad.headers.get("connection", "").lower() != "close"
        good = client.post("/v1/chat/completions", json=CHAT)
        assert good.status_code == 200, good.text
        assert _local_port(good) == connection, "the server closed the connection"
        assert client.get("/health").status_code == 200
