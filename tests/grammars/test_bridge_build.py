"""The bridge's llguidance backend is built beside start-up: settings made while it builds
reach it once built, and a failed build is raised where it is waited for."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest

from grammars import BridgedBackend


class Recording:
    """Just what BridgedBackend reads of a backend, and the settings it was given."""

    name, version, tokenizer_fingerprint, persistent, vocab_size = "x", "1", "f", True, 8
    keywords: Any = None
    options_key = "o"

    def __init__(self) -> None:
        self.settings: list[tuple[str, object]] = []

    def set_strict_objects(self, strict: bool) -> None:
        self.settings.append(("strict", strict))

    def set_json_layout(self, layout: str) -> None:
        self.settings.append(("layout", layout))

    def ready(self) -> None:
        pass


def test_settings_made_while_it_builds_reach_it_once_built():
    primary, fast, building = Recording(), Recording(), Future[Any]()
    bridged = BridgedBackend(primary, building)  # type: ignore[arg-type]
    bridged.set_json_layout("spaced")
    bridged.set_strict_objects(False)
    assert primary.settings == [("layout", "spaced"), ("strict", False)] and not fast.settings
    building.set_result(fast)
    bridged.ready()
    assert fast.settings == [("layout", "spaced"), ("strict", False)]
    bridged.set_json_layout("compact")  # built: at once
    assert fast.settings[-1] == ("layout", "compact") and bridged.fast is fast


def test_a_failed_build_is_raised_where_it_is_waited_for():
    building = Future[Any]()
    building.set_exception(ValueError("Only fast tokenizers are supported"))
    bridged = BridgedBackend(Recording(), building)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="fast tokenizers"):
        bridged.ready()
