"""Imports point one way: contracts and grammars are leaves; inside server,
api -> pipeline -> engines (protocol, errors, settings are shared); nothing imports bench."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# package (as a path prefix) -> module prefixes it must never import
FORBIDDEN = {
    "grammars": ("server", "contracts", "bench"),
    "contracts": ("server", "grammars", "bench"),
    "server/engines": ("server.pipeline", "server.api", "bench"),
    "server/pipeline": ("server.api", "bench"),
    "server/api": ("bench",),
    "server/protocol.py": ("server.api", "server.pipeline", "server.engines"),
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_point_one_way(package):
    target = ROOT / package
    files = [target] if target.suffix == ".py" else sorted(target.rglob("*.py"))
    assert files, f"nothing found at {package}"
    bad = [(str(f.relative_to(ROOT)), name) for f in files for name in _imports(f)
           if any(name == p or name.startswith(p + ".") for p in FORBIDDEN[package])]
    assert not bad, f"{package} must not import {FORBIDDEN[package]}: {bad}"
