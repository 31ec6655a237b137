"""How an upstream vLLM server is checked before it gets requests, and while it has them,
from the prober's thread (synchronous client):

- `GET /v1/models`: the model it serves and its context;
- its tokenizer, once each time it comes (back) into rotation: `POST /tokenize` of a text
  with several scripts, digits, JSON punctuation and whitespace must give the token ids
  StrictCall's own tokenizer gives. StrictCall plans prompts and grammars as token ids: an
  upstream serving another model (a redeploy, a wrong Service) would decode nonsense that
  still parses. One that differs stays out of rotation, with the reason in /health;
- a one-token decode (`POST /v1/completions`, max_tokens 1): an HTTP server that answers
  while its engine is dead fails here, not on the next request.

And `endpoints`: an --upstream URL as the endpoints it stands for, each of its host name's
addresses where `resolve` is on (a headless Service lists every vLLM pod), so each is
probed and ejected on its own."""

from __future__ import annotations

import socket
import urllib.parse
from dataclasses import dataclass
from typing import Any

import httpx

# Several scripts, digits, JSON punctuation and runs of whitespace: two tokenizers that
# agree on it are the same for what StrictCall sends.
TOKENIZER_PROBE = ' {"city": "Zürich", "n": 42.5}\n\tПривет, 東京! ¿Qué tal? 🙂  x'


@dataclass(frozen=True)
class Probe:
    """What a probe found: the model served and its context, or why it is out."""

    model: str | None
    max_model_len: int | None
    problem: str | None
    connect_failed: bool = False  # nothing answers at all: out at once


@dataclass(frozen=True)
class ProbeSpec:
    """What the prober asks besides /v1/models."""

    decode_prompt: tuple[int, ...] = ()  # token ids; empty: no decode probe
    tokenizer_ids: tuple[int, ...] | None = None  # TOKENIZER_PROBE's ids; None: not checked


@dataclass(frozen=True)
class Endpoint:
    url: str  # where requests go, e.g. http://10.0.0.7:8000
    host: str | None  # the Host header to send, when the URL's host is a resolved address
    source: str  # the --upstream URL it came from


def served(cards: list[dict[str, Any]], wanted: str | None) -> Probe:
    """The model card StrictCall sends requests for: the one named `wanted`, else the
    first (a vLLM server serves one model)."""
    names = [str(card.get("id")) for card in cards if isinstance(card, dict)]
    if not names:
        return Probe(None, None, "it serves no model")
    if wanted is not None and wanted not in names:
        return Probe(None, None, f"it serves {names}, not the --upstream-model {wanted!r}")
    card = cards[names.index(wanted)] if wanted is not None else cards[0]
    length = card.get("max_model_len")
    return Probe(names[names.index(wanted)] if wanted else names[0],
                 length if isinstance(length, int) else None, None)


def probe(http: httpx.Client, endpoint: Endpoint, *, wanted: str | None, spec: ProbeSpec,
          check_tokenizer: bool, decode_timeout_s: float) -> Probe:
    """Ask `endpoint` what it serves, then (if asked) check its tokenizer and decode."""
    headers = {"Host": endpoint.host} if endpoint.host else {}
    try:
        response = http.get(f"{endpoint.url}/v1/models", headers=headers)
    except httpx.HTTPError as exc:
        return Probe(None, None, describe(exc), connect_failed=_connect_failed(exc))
    if response.status_code != 200:
        return Probe(None, None, f"GET /v1/models answered {response.status_code}")
    try:
        found = served(response.json()["data"], wanted)
    except (ValueError, KeyError, TypeError):
        return Probe(None, None, "GET /v1/models did not answer a model list")
    if found.problem is not None:
        return found
    problem = None
    if check_tokenizer and spec.tokenizer_ids is not None:
        problem = _tokenizer_differs(http, endpoint, headers, found.model, spec.tokenizer_ids)
    if problem is None and spec.decode_prompt:
        problem = _decode_fails(http, endpoint, headers, found.model, spec.decode_prompt,
                                decode_timeout_s)
    return Probe(found.model, found.max_model_len, problem)


def _tokenizer_differs(http: httpx.Client, endpoint: Endpoint, headers: dict[str, str],
                       model: str | None, expected: tuple[int, ...]) -> str | None:
    try:
        response = http.post(f"{endpoint.url}/tokenize", headers=headers, json={
            "model": model, "prompt": TOKENIZER_PROBE, "add_special_tokens": False})
    except httpx.HTTPError as exc:
        return f"POST /tokenize: {describe(exc)}"
    if response.status_code == 404:
        return None  # no /tokenize (not vLLM's server): nothing to check with
    try:
        tokens = tuple(int(t) for t in response.json()["tokens"])
    except (ValueError, KeyError, TypeError):
        return f"POST /tokenize answered {response.status_code} without token ids"
    if tokens == expected:
        return None
    first = next((i for i, (a, b) in enumerate(zip(tokens, expected, strict=False)) if a != b),
                 min(len(tokens), len(expected)))
    return (f"its tokenizer differs from --model's ({len(tokens)} tokens for the probe text, "
            f"not {len(expected)}; first difference at token {first}): it serves another "
            "model, and StrictCall's token ids would mean other text there")


def _decode_fails(http: httpx.Client, endpoint: Endpoint, headers: dict[str, str],
                  model: str | None, prompt: tuple[int, ...], timeout_s: float) -> str | None:
    try:
        response = http.post(f"{endpoint.url}/v1/completions", headers=headers, json={
            "model": model, "prompt": list(prompt), "max_tokens": 1, "temperature": 0,
            "stream": False}, timeout=timeout_s)
    except httpx.HTTPError as exc:
        return f"a one-token decode: {describe(exc)}"
    if response.status_code != 200:
        return f"a one-token decode answered {response.status_code}"
    try:
        if not response.json()["choices"]:
            return "a one-token decode answered no choice"
    except (ValueError, KeyError, TypeError):
        return "a one-token decode did not answer a completion"
    return None


def endpoints(urls: list[str], *, resolve: bool) -> list[Endpoint]:
    """Each URL as itself, or (with `resolve`) as one endpoint per address of its host
    name; a name that does not resolve now stays as itself (it may later)."""
    out: list[Endpoint] = []
    for raw in urls:
        url = raw.rstrip("/").removesuffix("/v1")
        parts = urllib.parse.urlsplit(url)
        if not resolve or parts.hostname is None or _is_address(parts.hostname):
            out.append(Endpoint(url, None, url))
            continue
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            infos = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
        except OSError:
            out.append(Endpoint(url, None, url))
            continue
        for address in sorted({str(info[4][0]) for info in infos}):
            shown = f"[{address}]" if ":" in address else address
            out.append(Endpoint(f"{parts.scheme}://{shown}:{port}", parts.netloc, url))
    return out


def _is_address(host: str) -> bool:
    try:
        socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host)
    except OSError:
        return False
    return True


def _connect_failed(exc: BaseException) -> bool:
    return isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))


def describe(exc: BaseException) -> str:
    """An httpx failure in a few words, for logs and /health."""
    kinds = ((httpx.ConnectTimeout, "connect timed out"), (httpx.ConnectError,
             "connection refused"), (httpx.ReadTimeout, "no answer in time"),
             (httpx.RemoteProtocolError, "the connection closed mid-answer"),
             (httpx.ReadError, "the connection broke"), (httpx.PoolTimeout,
             "no free connection to it in time"))
    for kind, words in kinds:
        if isinstance(exc, kind):
            return words
    return f"{type(exc).__name__}: {exc}"[:200]
