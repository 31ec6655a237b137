"""Imports point one way: contracts and grammars are leaves; inside server,
api -> pipeline -> engines (protocol, errors, settings are shared); nothing imports bench.
Outside a leaf package, only what its `__init__` exports is used."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("grammars", "contracts", "server", "bench")
_LOWER_SERVER = ("server.api", "server.pipeline", "server.engines", "server.cli")

# path prefix -> module prefixes it must never import. Every module of every package is
# under at least one prefix (checked below), so a new module is never left out.
FORBIDDEN = {
    "grammars": ("server", "contracts", "bench"),
    "contracts": ("server", "grammars", "bench"),
    "server/engines": ("server.pipeline", "server.api", "server.cli", "bench"),
    "server/pipeline": ("server.api", "server.cli", "bench"),
    # The execution layer, beside the pipeline: the pipeline and the api use it, not back.
    "server/execution": (*_LOWER_SERVER, "bench"),
    "server/api": ("server.cli", "bench"),
    # Model formats: beside the pipeline (they adapt its plans and use its reading types).
    "server/formats": ("server.api", "server.cli", "server.engines", "bench"),
    "server/__init__.py": (*_LOWER_SERVER, "bench"),
    "server/protocol.py": (*_LOWER_SERVER, "bench"),
    "server/errors.py": (*_LOWER_SERVER, "bench"),
    "server/settings.py": (*_LOWER_SERVER, "bench"),
    "server/identity.py": (*_LOWER_SERVER, "bench"),
    "server/metrics.py": (*_LOWER_SERVER, "bench"),
    "server/model_store.py": (*_LOWER_SERVER, "bench"),
    "server/process.py": (*_LOWER_SERVER, "bench"),
    "server/ratelimit.py": (*_LOWER_SERVER, "bench"),
    "server/records.py": (*_LOWER_SERVER, "bench"),
    "server/cli.py": ("bench",),
    "server/eval": (*_LOWER_SERVER, "bench"),  # a client of any server: no server parts
}
# Packages with no rule of their own: bench may import anything. What holds for it is that
# nothing else imports it (every rule above forbids "bench"; checked on its own below).
FREE = ("bench",)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def _modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def _rules_for(path: Path) -> list[str]:
    rel = str(path.relative_to(ROOT))
    return [prefix for prefix in (*FORBIDDEN, *FREE)
            if rel == prefix or rel.startswith(prefix + "/")]


def test_every_module_is_under_a_rule():
    loose = [str(p.relative_to(ROOT)) for p in _modules() if not _rules_for(p)]
    assert not loose, f"add these modules to FORBIDDEN: {loose}"


def _breaking(root: Path, package: str, forbidden: tuple[str, ...]) -> list[tuple[str, str]]:
    """(file, module) for each import under root/package of a module in `forbidden`."""
    target = root / package
    files = [target] if target.suffix == ".py" else sorted(target.rglob("*.py"))
    assert files, f"nothing found at {package}"
    return [(str(f.relative_to(root)), name) for f in files for name in _imports(f)
            if any(name == p or name.startswith(p + ".") for p in forbidden)]


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_point_one_way(package):
    bad = _breaking(ROOT, package, FORBIDDEN[package])
    assert not bad, f"{package} must not import {FORBIDDEN[package]}: {bad}"


def test_nothing_imports_bench():
    bad = [hit for pkg in PACKAGES if pkg not in FREE for hit in _breaking(ROOT, pkg, FREE)]
    assert not bad, f"nothing may import bench (it drives the server like a user): {bad}"


def test_the_rule_check_sees_a_forbidden_import(tmp_path):
    """The check itself can fail: a planted import of each kind is found."""
    (tmp_path / "grammars").mkdir()
    (tmp_path / "grammars" / "leak.py").write_text(
        "import os\nimport server.api\nfrom bench.latency import main\n"
        "from .local import x\n")
    assert sorted(_breaking(tmp_path, "grammars", FORBIDDEN["grammars"])) == [
        ("grammars/leak.py", "bench.latency"), ("grammars/leak.py", "server.api")]


@pytest.mark.parametrize("leaf", ["grammars"])
def test_leaf_internals_stay_inside(leaf):
    """Outside `grammars`, only what grammars/__init__.py exports is imported."""
    bad = [(str(p.relative_to(ROOT)), name) for p in _modules()
           if not str(p.relative_to(ROOT)).startswith(leaf + "/")
           for name in _imports(p) if name.startswith(leaf + ".")]
    assert not bad, f"import these from {leaf!r} itself (export them there): {bad}"
