from __future__ import annotations

import pytest

from server.process import ServerProcess

MODEL = "smollm2-135m-instruct"


@pytest.fixture(scope="session")
def live_server(model_dir):
    """A real `strictcall serve` process on the embedded model with the example contracts,
    shared by the whole run; yields its base URL."""
    try:
        with ServerProcess("--model", str(model_dir), "--served-model-name", MODEL,
                           "--contracts", "contracts.examples") as proc:
            yield proc.base_url
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="session")
def live_client(live_server):
    from openai import OpenAI

    with OpenAI(base_url=f"{live_server}/v1", api_key="unused", max_retries=0,
                timeout=300) as client:
        yield client  # closed at the end: no socket left for the GC to warn about
