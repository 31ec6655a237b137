"""`ResponseStore`: stored Responses API responses as records of the state store
(namespace "responses"), scoped by tenant like sessions, kept `--response-ttl-s`.

A record holds the response object as it was returned, the items the model saw before
this response's own input (`context`), that input (`input`, each item with its id) and the
session its chain's slots live in. A response chained onto it with `previous_response_id`
starts from `context + input + output`: one read, however long the chain, and a chain
does not break when an earlier response is deleted or expires."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from server.state import StateStore

NAMESPACE = "responses"
JsonObject = dict[str, Any]


@dataclass(frozen=True)
class StoredResponse:
    response: JsonObject
    context: list[JsonObject]  # the items before this response's own input
    input: list[JsonObject]  # its own input items
    session: str | None

    @property
    def output(self) -> list[JsonObject]:
        return list(self.response.get("output") or [])

    def conversation(self) -> list[JsonObject]:
        """Every item so far, oldest first: what a chained response starts from."""
        return [*self.context, *self.input, *self.output]

    def input_items(self) -> list[JsonObject]:
        """What GET /v1/responses/{id}/input_items lists: every item the model saw."""
        return [*self.context, *self.input]


class ResponseStore:
    def __init__(self, records: StateStore, *, ttl_s: float) -> None:
        self.records = records
        self.ttl_s = ttl_s

    def keep(self, scope: str, stored: StoredResponse) -> None:
        self.records.put(NAMESPACE, _key(scope, str(stored.response["id"])), {
            "response": stored.response, "context": stored.context, "input": stored.input,
            "session": stored.session}, ttl_s=self.ttl_s)

    def get(self, scope: str, response_id: str) -> StoredResponse | None:
        found = self.records.get(NAMESPACE, _key(scope, response_id))
        if found is None:
            return None
        value = found.value
        return StoredResponse(value["response"], list(value.get("context") or []),
                              list(value.get("input") or []), value.get("session"))

    def delete(self, scope: str, response_id: str) -> bool:
        return self.records.delete(NAMESPACE, _key(scope, response_id))


def _key(scope: str, response_id: str) -> str:
    return f"{scope}\x1f{response_id}"
