"""Imports point one way: contracts and grammars are leaves; inside server,
api -> pipeline -> (formats, execution, engines), each of those three knowing neither of the
others (the shared modules: task, options, errors, settings, ...); nothing imports bench or
docsgen (the docs site), and bench does not import docsgen.
Outside a leaf package, only what its `__init__` exports is used. No import circle anywhere,
counting imports made under TYPE_CHECKING or inside functions."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("grammars", "contracts", "server", "bench", "docsgen")
_LOWER_SERVER = ("server.api", "server.pipeline", "server.engines", "server.cli")
_SHARED = (*_LOWER_SERVER, "server.formats", "server.execution", "bench")

# path prefix -> module prefixes it must never import. Every module of every package is
# under at least one prefix (checked below), so a new module is never left out.
FORBIDDEN = {
    "grammars": ("server", "contracts", "bench"),
    "contracts": ("server", "grammars", "bench"),
    # Engines: tokens in, tokens out; they know no model format, plan or API.
    "server/engines": ("server.pipeline", "server.api", "server.cli", "server.formats",
                       "server.execution", "bench"),
    "server/pipeline": ("server.api", "server.cli", "bench"),
    # The pipeline's stages: the guards plug into the decode and know nothing after it; the
    # checks know the guards' verdict (a trip), never the composition that runs them.
    "server/pipeline/guards": ("server.api", "server.cli", "bench", "server.pipeline.chat",
                               "server.pipeline.stream", "server.pipeline.checking",
                               "server.pipeline.plan", "server.pipeline.prepared",
                               "server.pipeline.decode"),
    "server/pipeline/checking": ("server.api", "server.cli", "bench", "server.pipeline.chat",
                                 "server.pipeline.stream"),
    # The execution layer, beside the pipeline: the pipeline and the api use it, not back.
    "server/execution": (*_LOWER_SERVER, "server.formats", "bench"),
    # Of the pipeline the api sees only what server/pipeline/__init__.py exports (the
    # pipeline, the answer, its events and opening): checked below.
    "server/api": ("server.cli", "bench"),
    # Model formats own every call marker; they render the pipeline's asks, never read it.
    "server/formats": (*_LOWER_SERVER, "server.execution", "bench"),
    "server/__init__.py": _SHARED,
    "server/task.py": _SHARED,
    "server/options.py": _SHARED,
    "server/errors.py": _SHARED,
    "server/settings.py": _SHARED,
    "server/settings_parts.py": _SHARED,
    "server/identity.py": _SHARED,
    "server/metrics.py": _SHARED,
    "server/model_store.py": _SHARED,
    "server/gguf_model.py": _SHARED,
    "server/process.py": _SHARED,
    "server/ratelimit.py": _SHARED,
    # State shared by replicas (records, rate-limit buckets): the execution layer and the
    # api use it; it knows none of them.
    "server/state": _SHARED,
    "server/logs.py": _SHARED,
    # Sessions' slots and stored responses over the state store: the pipeline and the api
    # use them; they know neither.
    "server/sessions": _SHARED,
    # The conversation (evidence, grounding, slots, questions): the pipeline asks it per
    # turn through one seam; it knows no pipeline, API, engine or format.
    "server/dialogue": _SHARED,
    # The composition root builds the parts the api serves: it knows no HTTP.
    "server/wiring.py": ("server.api", "server.cli", "bench"),
    "server/background.py": ("server.api", "server.pipeline", "server.cli", "bench"),
    "server/cli.py": ("bench",),
    "server/cli_flags.py": ("bench",),
    "server/eval": _SHARED,  # a client of any server: no server parts
}
# Packages with no rule of their own, at the top: bench (it drives the server like a user)
# and docsgen (the docs site; it renders bench's result pages) may import anything. What
# holds for them is that nothing below imports them (checked on its own below), and bench
# knows nothing of the docs.
FREE = ("bench", "docsgen")


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


def test_nothing_imports_bench_or_docsgen():
    bad = [hit for pkg in PACKAGES if pkg not in FREE for hit in _breaking(ROOT, pkg, FREE)]
    assert not bad, f"nothing may import bench or docsgen (they sit on top): {bad}"
    assert not _breaking(ROOT, "bench", ("docsgen",)), "bench must not know the docs site"


def test_the_rule_check_sees_a_forbidden_import(tmp_path):
    """The check itself can fail: a planted import of each kind is found."""
    (tmp_path / "grammars").mkdir()
    (tmp_path / "grammars" / "leak.py").write_text(
        "import os\nimport server.api\nfrom bench.speed.latency import main\n"
        "from .local import x\n")
    assert sorted(_breaking(tmp_path, "grammars", FORBIDDEN["grammars"])) == [
        ("grammars/leak.py", "bench.speed.latency"), ("grammars/leak.py", "server.api")]


@pytest.mark.parametrize("leaf", ["grammars"])
def test_leaf_internals_stay_inside(leaf):
    """Outside `grammars`, only what grammars/__init__.py exports is imported."""
    bad = [(str(p.relative_to(ROOT)), name) for p in _modules()
           if not str(p.relative_to(ROOT)).startswith(leaf + "/")
           for name in _imports(p) if name.startswith(leaf + ".")]
    assert not bad, f"import these from {leaf!r} itself (export them there): {bad}"


def test_the_api_sees_only_what_the_pipeline_exports():
    """Nothing under server/api imports a module of server/pipeline: adapters see the
    answer, never how the pipeline prepared or checked it."""
    bad = [(str(p.relative_to(ROOT)), name) for p in sorted((ROOT / "server/api").rglob("*.py"))
           for name in _imports(p) if name.startswith("server.pipeline.")]
    assert not bad, f"import these from server.pipeline itself (export them there): {bad}"


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)


def _import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports (`from pkg import submodule` counts as the
    submodule; every import in the file counts, wherever it is written)."""
    modules = {_module_name(p): p for p in _modules()}

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                found.update(resolve(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    found.add(full if full in modules else resolve(node.module))
        graph[name] = {m for m in found if m is not None and m != name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle_anywhere():
    assert _circles(_import_graph()) == []


def test_the_circle_check_finds_a_circle():
    """The check above can fail: a circle hidden three modules deep is found."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [["a", "b", "c"]]


def test_every_vllm_test_lives_where_make_test_vllm_collects():
    """`make test-vllm` collects tests/server/engines alone (its environment lacks the main
    tiers' test dependencies): a vllm-marked test anywhere else would never run."""
    import re

    marked = re.compile(r"pytest\.mark\.vllm\b")
    tests = Path(__file__).resolve().parent
    found = {p.relative_to(tests).as_posix() for p in tests.rglob("*.py")
             if p.name != "test_layers.py" and marked.search(p.read_text())}
    assert found and all(f.startswith("server/engines/") for f in found), sorted(found)
