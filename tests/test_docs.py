"""Code comments cite the protocol by section (``docs/protocol.md#<anchor>``): every cited anchor is a section."""
from __future__ import annotations

import re

from fixtures.settings import PROJECT_ROOT

PROTOCOL = PROJECT_ROOT / "docs" / "protocol.md"


def _anchors() -> set[str]:
    headings = re.findall(r"^## (.+)$", PROTOCOL.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in headings}


def test_every_cited_protocol_section_exists() -> None:
    anchors = _anchors()
    assert {"window-rule", "caches", "claims", "listwise", "publishing"} <= anchors
    cited = {}
    for path in PROJECT_ROOT.rglob("*"):
        if path.suffix not in (".py", ".md", ".toml") or ".venv" in path.parts or not path.is_file():
            continue
        for anchor in re.findall(r"docs/protocol\.md#([a-z0-9-]+)", path.read_text(encoding="utf-8", errors="ignore")):
            cited.setdefault(anchor, path.relative_to(PROJECT_ROOT).as_posix())
    missing = {a: p for a, p in cited.items() if a not in anchors}
    assert cited and not missing, f"cited protocol sections that do not exist: {missing}"


def test_every_cited_statistics_section_exists() -> None:
    """docs/statistics.md#<anchor> citations name a section (## or ###) of that document."""
    text = (PROJECT_ROOT / "docs" / "statistics.md").read_text(encoding="utf-8")
    headings = re.findall(r"^###? (.+)$", text, flags=re.MULTILINE)
    anchors = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in headings}
    assert {"weak-null", "tost", "pins", "h3", "calibration"} <= anchors
    cited = {}
    for path in PROJECT_ROOT.rglob("*"):
        if path.suffix not in (".py", ".md", ".toml") or ".venv" in path.parts or not path.is_file():
            continue
        for anchor in re.findall(r"docs/statistics\.md#([a-z0-9-]+)", path.read_text(encoding="utf-8", errors="ignore")):
            cited.setdefault(anchor, path.relative_to(PROJECT_ROOT).as_posix())
    missing = {a: p for a, p in cited.items() if a not in anchors}
    assert cited and not missing, f"cited statistics sections that do not exist: {missing}"


def _defines(path, name: str) -> bool:
    """Whether the module file defines ``name`` at its top level (a function, class or assignment), read without
    importing it."""
    import ast

    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
    return False


def test_the_architecture_map_names_only_what_exists() -> None:
    """Every module, folder and top-level name docs/architecture.md cites in backticks is in the checkout."""
    text = (PROJECT_ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    cited = set(re.findall(r"`((?:fixtures|rankers|reports|harness|specs|conftest|tests)[A-Za-z0-9_./]*)`", text))
    assert len(cited) > 20
    missing = []
    for ref in sorted(cited):
        if "/" in ref or ref.endswith(".py"):
            if not (PROJECT_ROOT / ref).exists():
                missing.append(ref)
            continue
        parts = ref.split(".")
        for cut in range(len(parts), 0, -1):  # the longest prefix that is a module or package
            base = PROJECT_ROOT.joinpath(*parts[:cut])
            module = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
            if module.is_file():
                rest = parts[cut:]
                if rest and not _defines(module, rest[0]):
                    missing.append(ref)
                break
        else:
            missing.append(ref)
    assert not missing, f"docs/architecture.md cites what does not exist: {missing}"
