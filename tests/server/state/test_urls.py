"""--state-url and --rate-limit-url: what each URL names, passwords never shown, and a URL
no store takes ends `strictcall serve` with one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from server.settings import Settings
from server.state import shown, state_url
from server.state.url import sqlite_path
from tests.server.test_cli import serve_command


def test_the_state_url_defaults_to_sqlite_in_the_cache_and_honours_tools_db(tmp_path,
                                                                             monkeypatch):
    monkeypatch.delenv("STRICTCALL_TOOLS_DB", raising=False)  # tests/conftest.py sets it
    assert sqlite_path(state_url(Settings(cache_dir=tmp_path))) == tmp_path / "state.sqlite3"
    old = Settings(cache_dir=tmp_path, tools_db=tmp_path / "t.db")
    assert sqlite_path(state_url(old)) == tmp_path / "t.db"
    both = Settings(tools_db=tmp_path / "t.db", state_url="postgresql://db/x")
    assert state_url(both) == "postgresql://db/x"  # the new setting wins
    assert sqlite_path("sqlite:////abs/path.db") == Path("/abs/path.db")  # SQLAlchemy's


def test_passwords_are_never_shown():
    assert shown("postgresql://app:s3cret@db:5432/x") == "postgresql://app:***@db:5432/x"
    assert shown("redis://:pw@cache:6379/0") == "redis://:***@cache:6379/0"
    assert shown("sqlite:///tmp/x.db") == "sqlite:///tmp/x.db"
    assert shown("sqlite:////abs/x.db") == "sqlite:////abs/x.db"
    # libpq takes the password as a query parameter too.
    assert shown("postgresql://db/x?sslmode=require&password=s3cret&sslpassword=k") == \
        "postgresql://db/x?sslmode=require&password=***&sslpassword=***"


@pytest.mark.parametrize(("args", "says"), [
    (("--state-url", "mysql://app:s3cret@db/x"), "--state-url 'mysql://app:***@db/x': use"),
    (("--state-url", "sqlite://"), "names no file"),
    (("--rate-limit-url", "http://cache:6379"), "--rate-limit-url 'http://cache:6379': use"),
])
def test_a_url_no_store_takes_is_one_line(args, says):
    done = serve_command("--engine", "upstream", "--upstream", "http://127.0.0.1:9", *args)
    assert done.returncode == 2
    assert says in done.stderr and "s3cret" not in done.stderr
    assert "Traceback" not in done.stderr
