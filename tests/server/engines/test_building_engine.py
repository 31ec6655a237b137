"""`strictcall serve` starts the llama.cpp engine's build before it imports the app
(BuildingEngine): the app's engine factory then hands over that engine, or raises what its
build raised, where the app asks for it."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from server.engines import factory
from server.engines.factory import BuildingEngine, engine_factory
from server.settings import Settings


class Built:
    """Stands for an engine: where and for which settings it was built."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.thread = threading.current_thread().name


def test_the_engine_is_built_on_a_thread_of_its_own_and_handed_to_the_app(monkeypatch):
    monkeypatch.setattr(factory, "build_engine", Built)
    settings = Settings(engine="llamacpp")
    building = engine_factory(settings)
    assert isinstance(building, BuildingEngine)
    engine: Any = building(settings)
    assert isinstance(engine, Built) and engine.settings is settings
    assert engine.thread == "engine-build"
    assert building(settings) is engine  # one engine, however often it is asked for


def test_what_the_build_raised_is_raised_where_the_app_asks_for_the_engine(monkeypatch):
    def fails(settings: Settings) -> Any:
        raise factory.EngineConfigError("llama.cpp could not load 'x.gguf'")

    monkeypatch.setattr(factory, "build_engine", fails)
    settings = Settings(engine="llamacpp")
    building = engine_factory(settings)
    with pytest.raises(factory.EngineConfigError, match="could not load"):
        building(settings)


def test_an_engine_built_for_some_settings_is_not_handed_out_for_others(monkeypatch):
    monkeypatch.setattr(factory, "build_engine", Built)
    building = engine_factory(Settings(engine="llamacpp"))
    with pytest.raises(ValueError, match="settings it was started with"):
        building(Settings(engine="llamacpp"))


@pytest.mark.parametrize("engine", ["torch", "upstream"])
def test_other_engines_are_built_when_the_app_starts(engine):
    assert engine_factory(Settings(engine=engine)) is factory.build_engine
