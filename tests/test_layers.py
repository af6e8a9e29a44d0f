"""Layers point one way and nothing imports in a circle.

data (fixtures: NevIR, splits, groups, populations, samples) → pools (fixtures: models, routes,
pools) → rankers → reports → harness → evaluation (``specs/``, ``conftest.py``). Every import in the
project's source and its evaluation, at module level, inside a function or under ``if TYPE_CHECKING:``
(a type-only import is still a dependency a reader must follow), is read with ``ast``; an import that
points to a higher layer (the evaluation may import every layer, nothing imports it, tests included),
an import cycle between modules, production or evaluation code importing test code, or a function-level
import without a one-line reason comment fails here, naming the file and line.
"""
from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from fixtures.settings import PROJECT_ROOT

PACKAGES = ("fixtures", "rankers", "reports", "harness")
#: fixtures modules that form the pools layer (everything else in fixtures is the data layer).
POOL_MODULES = ("fixtures.models", "fixtures.routes", "fixtures.pools", "fixtures.freeze_pools", "fixtures.gguf",
                "fixtures.perturbation")
#: The evaluation: the specs and the pytest wiring at the repository root (docs/architecture.md#layers).
EVALUATION = ("specs", "conftest")
LAYERS = ("data", "pools", "rankers", "reports", "harness", "evaluation")


def layer_of(module: str) -> str | None:
    top = module.split(".")[0]
    if top in EVALUATION:
        return "evaluation"
    if top == "fixtures":
        return "pools" if any(module == m or module.startswith(m + ".") for m in POOL_MODULES) else "data"
    return top if top in PACKAGES else None


def _module_name(path: Path) -> str:
    rel = path.relative_to(PROJECT_ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[str, int, bool, str]]:
    """(imported module, line, inside a function, the source line) for every project import in a file."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    tree = ast.parse(source)
    out: list[tuple[str, int, bool, str]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                out.extend((a.name, child.lineno, in_function, lines[child.lineno - 1]) for a in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                out.append((child.module, child.lineno, in_function, lines[child.lineno - 1]))
            visit(child, nested)

    visit(tree, False)
    return out


def _production() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (PROJECT_ROOT / pkg).rglob("*.py"))


def _sources() -> list[Path]:
    """The production packages and the evaluation: every module whose imports the layers govern."""
    return sorted([*_production(), *(PROJECT_ROOT / "specs").rglob("*.py"), PROJECT_ROOT / "conftest.py"])


def test_no_import_points_to_a_higher_layer() -> None:
    upward = []
    for path in _sources():
        mine = layer_of(_module_name(path))
        for module, line, _, _ in _imports(path):
            theirs = layer_of(module)
            if theirs is not None and LAYERS.index(theirs) > LAYERS.index(mine):
                upward.append(f"{path.relative_to(PROJECT_ROOT)}:{line}: {mine} imports {module} ({theirs})")
    assert not upward, "imports pointing up the layers:\n" + "\n".join(upward)


def test_production_code_never_imports_test_code() -> None:
    """Test servers and probes live in ``tests/support``; the suite's packages and its evaluation (benchmarks
    included: their stub server is ``harness.stub_chat``) must run without them."""
    found = [f"{path.relative_to(PROJECT_ROOT)}:{line}: {module}" for path in _sources()
             for module, line, _, _ in _imports(path) if module.split(".")[0] == "tests"]
    assert not found, "production or evaluation modules importing tests:\n" + "\n".join(found)


def test_tests_never_import_the_evaluation() -> None:
    """The specs are the top layer: a test imports what they use from the packages, never a spec or conftest.py
    (pytest loads conftest.py itself)."""
    found = [f"{path.relative_to(PROJECT_ROOT)}:{line}: {module}"
             for path in sorted((PROJECT_ROOT / "tests").rglob("*.py"))
             for module, line, _, _ in _imports(path) if layer_of(module) == "evaluation"]
    assert not found, "tests importing the evaluation:\n" + "\n".join(found)


def test_type_only_imports_are_checked_too(tmp_path: Path) -> None:
    """An import under ``if TYPE_CHECKING:`` is seen by the layer and cycle checks (it is a dependency)."""
    probe = tmp_path / "probe.py"
    probe.write_text("from typing import TYPE_CHECKING\n"
                     "if TYPE_CHECKING:\n    from harness.session import Evaluation\n", encoding="utf-8")
    assert ("harness.session", 3, False, "    from harness.session import Evaluation") in _imports(probe)


def test_no_import_cycle_between_modules() -> None:
    graph: dict[str, set[str]] = {}
    for path in _sources():
        name = _module_name(path)
        graph[name] = {m for m, *_ in _imports(path) if layer_of(m) is not None}
    known = set(graph)

    def resolve(module: str) -> str | None:
        while module and module not in known:
            module = module.rpartition(".")[0]
        return module or None

    edges = {a: {r for b in bs if (r := resolve(b)) and r != a} for a, bs in graph.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := dfs(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := dfs(node)):
            pytest.fail("import cycle: " + " -> ".join(cycle))


def test_function_level_imports_say_why() -> None:
    """A function-level import in a production module keeps a heavy or optional dependency out of import time, and
    says so (the specs and benchmarks import what a test needs inside it, so collection stays cheap)."""
    silent = [f"{path.relative_to(PROJECT_ROOT)}:{line}: {text.strip()}"
              for path in _production() for module, line, inside, text in _imports(path)
              if inside and "#" not in text and not text.rstrip().endswith(",")]
    assert not silent, "function-level imports without a reason comment:\n" + "\n".join(silent)


@pytest.mark.parametrize("package", PACKAGES)
def test_project_packages_resolve_to_the_checkout(package: str) -> None:
    """PyPI has unrelated packages named fixtures, rankers, reports and harness: ours must win, and the
    project must never install its folders into site-packages where they would collide."""
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.origin is not None
    assert Path(spec.origin).resolve().is_relative_to(PROJECT_ROOT), spec.origin
    from importlib.metadata import distribution

    installed = {str(f).split("/")[0] for f in distribution("preference-position").files or ()}
    assert package not in installed, f"the installed distribution ships a top-level {package!r}"


def test_every_test_module_has_a_unique_basename() -> None:
    """tests/ and specs/ are collected in one session without packages: two modules with one basename cannot both
    be imported, and pytest stops at collection (seen once: a statistics test named like a spec)."""
    names: dict[str, str] = {}
    for folder in ("tests", "specs"):
        for path in sorted((PROJECT_ROOT / folder).rglob("*.py")):
            if path.name.startswith(("test_", "bench_")):
                where = path.relative_to(PROJECT_ROOT).as_posix()
                assert path.name not in names, f"{where} and {names[path.name]} share a basename"
                names[path.name] = where
