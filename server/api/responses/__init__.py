"""The OpenAI Responses API (`POST /v1/responses`), stateless, as a thin adapter: wire models
(`request`, `output`), translation to and from the chat pipeline (`translate`, `output`),
streaming events (`events`) and the route."""

from server.api.responses.route import create_response

__all__ = ["create_response"]
