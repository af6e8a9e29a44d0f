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
