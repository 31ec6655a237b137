"""Each setting is written once: the flags are generated from the Settings fields, the
grammar policies' fields agree with their table in grammars, and the policies keep their
flat flag and variable names."""

from __future__ import annotations

import argparse
import typing
from pathlib import Path

import pytest

from grammars import POLICY_FLAGS
from server.cli_flags import add_setting_flags, given_settings, setting_fields
from server.settings import GrammarPolicies, Settings, setting


def _parser(settings: type[Settings] = Settings) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    add_setting_flags(parser, settings)
    return parser


def test_every_setting_is_a_flag_with_help():
    parser = _parser()
    by_dest = {a.dest: a for a in parser._actions}
    for name, _field in setting_fields():
        assert name in by_dest, f"no flag for setting {name!r}"
        assert by_dest[name].help, f"setting {name!r} has no help"


def test_a_new_setting_becomes_a_flag():
    class More(Settings):
        widgets: int = setting(3, "how many widgets")

    args = _parser(More).parse_args(["--widgets", "7", "--no-strict-objects"])
    assert given_settings(args)["strict_objects"] is False
    assert args.widgets == 7


def test_flags_are_typed_from_the_fields():
    args = _parser().parse_args(["--port", "9", "--contracts", "a", "--contracts", "b",
                                 "--no-jump-forward", "--patterns", "search",
                                 "--api-keys", "keys.yaml"])
    settings = Settings(**given_settings(args))
    assert (settings.port, settings.contracts, settings.jump_forward) == (9, ["a", "b"], False)
    assert settings.policies.patterns == "search" and str(settings.api_keys_file) == "keys.yaml"
    with pytest.raises(SystemExit):
        _parser().parse_args(["--engine", "nonesuch"])


def test_policies_agree_with_their_table():
    fields = GrammarPolicies.model_fields
    assert tuple(fields) == tuple(f.name for f in POLICY_FLAGS)
    for flag in POLICY_FLAGS:
        field = fields[flag.name]
        assert field.default == flag.default, flag.name
        assert field.description == flag.help
        if flag.choices is not None:
            assert typing.get_args(field.annotation) == flag.choices


def test_policies_keep_their_flat_names(monkeypatch):
    assert Settings(strict_objects=False).policies.strict_objects is False
    monkeypatch.setenv("STRICTCALL_PATTERNS", "search")
    monkeypatch.setenv("STRICTCALL_IMPLIED_TYPES", "false")
    settings = Settings(strict_objects=False)
    assert settings.policies == GrammarPolicies(strict_objects=False, patterns="search",
                                                implied_types=False)
    with pytest.raises(ValueError, match="patterns"):
        Settings(patterns="sometimes")


def test_the_outcome_journal_is_named_by_the_replica():
    """A StatefulSet pod's name is stable, so a replaced pod reads the journal its
    predecessor left (the host name of a Deployment's pod is new each time)."""
    from server.wiring import journal_path

    named = journal_path(Settings(state_url="postgresql://u:p@db/x", replica_name="sc-0",
                                  cache_dir=Path("/var/cache/strictcall")))
    assert named == Path("/var/cache/strictcall/outcomes-sc-0.journal")
