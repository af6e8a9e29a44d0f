"""Results travel as the typed run record: nothing outside ``reports/record.py`` spells an artifact's manifest name
or reads a manifest's artifacts or profile back from strings (docs/architecture.md, "One run").

Every source file of ``reports/`` and ``harness/`` is read with ``ast``: a string that starts with an artifact
kind and a colon (``"outcomes:"``, ``f"judgments:{name}:..."``), a ``[...]["artifacts"]`` subscript, or a
``manifest.get("profile")`` call anywhere else fails here, naming the file and line.
"""
from __future__ import annotations

import ast
from pathlib import Path

from fixtures.settings import PROJECT_ROOT
from reports.record import ARTIFACT_KINDS

RECORD = PROJECT_ROOT / "reports" / "record.py"
PREFIXES = tuple(f"{kind}:" for kind in ARTIFACT_KINDS)


def _leading_text(node: ast.AST) -> str | None:
    """The text a string literal or f-string starts with (None for anything else)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return str(node.values[0].value)
    return None


def _string_reads(path: Path, root: Path = PROJECT_ROOT) -> list[str]:
    """Each place in a source file where a result is read back from strings, as ``file:line: what``."""
    found = []
    where = path.relative_to(root)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        text = _leading_text(node)
        if text is not None and text.startswith(PREFIXES):
            found.append(f"{where}:{node.lineno}: artifact name {text[:30]!r}")
        if isinstance(node, ast.Subscript) and _leading_text(node.slice) == "artifacts":
            found.append(f"{where}:{node.lineno}: [\"artifacts\"]")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "manifest"
                and node.args and _leading_text(node.args[0]) == "profile"):
            found.append(f"{where}:{node.lineno}: manifest.get(\"profile\")")
    return sorted(set(found))  # an f-string's leading text is also a constant node: one hit per line and kind


def test_only_the_record_spells_artifact_names_or_reads_manifests_back() -> None:
    sources = sorted(p for package in ("reports", "harness") for p in (PROJECT_ROOT / package).rglob("*.py"))
    found = [hit for path in sources if path != RECORD for hit in _string_reads(path)]
    assert not found, "results read back from strings outside reports/record.py:\n" + "\n".join(found)


def test_the_check_sees_each_way_a_result_was_read_back(tmp_path: Path) -> None:
    probe = PROJECT_ROOT / "reports" / "record.py"  # parsed, not imported: the record itself spells them
    assert not any("artifact name" in hit for hit in _string_reads(probe)), "the record builds names from parts"
    module = tmp_path / "old_writer.py"
    module.write_text('paths = dict(zip(tables["artifacts"]["artifact"], tables["artifacts"]["path"]))\n'
                      'outcomes = paths[f"outcomes:{ranker}"]\n'
                      'profile = manifest.get("profile")\n', encoding="utf-8")
    hits = _string_reads(module, tmp_path)
    assert hits == ['old_writer.py:1: ["artifacts"]', "old_writer.py:2: artifact name 'outcomes:'",
                    'old_writer.py:3: manifest.get("profile")']
