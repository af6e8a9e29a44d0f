"""The comparison with a saved run as a reader meets it (terminal and report.md): the rankers that changed lead, the
unchanged ones are named in one line, and a long saved_partial text is said once, not in every row."""
from __future__ import annotations

import pandas as pd

from reports.table_registry import COMPARISON_COLUMNS
from reports.render import md_escape
from reports.report_md import comparison_brief, comparison_lines
from reports.terminal import comparison_text

PARTIAL = "the run deselected " + ", ".join(f"specs/test_{k}.py::test_x[test-grader]" for k in range(12))


def row(ranker: str, measure: str, decision: str, side: str = "both", delta: float = 0.0) -> dict[str, object]:
    values = dict.fromkeys(COMPARISON_COLUMNS, float("nan"))
    values.update({"ranker": ranker, "measure": measure, "now": 0.5 + delta, "then": 0.5, "delta": delta,
                   "delta_lo": delta - 0.01, "delta_hi": delta + 0.01, "decision": decision})
    return {**values, "side": side, "versions_differ": "", "saved_partial": PARTIAL}


def frame() -> pd.DataFrame:
    rows = [row(name, m, "unchanged") for name in ("fusion", "e0", "bg8") for m in ("strict", "mrr", "ties")]
    rows += [row("ce", "strict", "unchanged"), row("ce", "mrr", "changed within margin", delta=0.004)]
    rows += [row("mine", "strict", "unchanged"), row("mine", "mrr", "changed", delta=-0.05)]
    rows += [row("outside", "strict", "unchanged", side="this run only"),
             {"ranker": "old", "side": "saved run only", "measure": "(not compared)", "saved_partial": PARTIAL}]
    return pd.DataFrame(rows)


def test_rankers_that_changed_lead_and_unchanged_ones_are_named_once() -> None:
    brief = comparison_brief(frame())
    assert brief.moved[["ranker", "measure", "decision"]].values.tolist() == [
        ["mine", "mrr", "changed"], ["ce", "mrr", "changed within margin"]]
    assert brief.unchanged == ("fusion", "e0", "bg8")
    assert brief.one_sided == {"this run only": ("outside",), "saved run only": ("old",)}
    assert brief.saved_partial == PARTIAL and brief.versions_differ == ""
    assert "saved_partial" not in brief.moved.columns


def test_the_terminal_says_the_saved_runs_partiality_once_and_leads_with_the_change() -> None:
    text = "\n".join(comparison_text("test", "run-1", frame()))
    assert text.count(PARTIAL) == 1
    lines = text.splitlines()
    table = lines[lines.index("not unchanged, gravest first:") + 2:]
    assert table[0].split()[:2] == ["mine", "mrr"] and table[1].split()[:2] == ["ce", "mrr"]
    assert "unchanged in every measure: fusion, e0, bg8" in text
    assert "rankers in this run only, not compared: outside" in text
    assert max(len(line) for line in lines if "partial" not in line) < 120


def test_report_md_shows_the_same_order() -> None:
    text = "\n".join(comparison_lines(frame()))
    assert text.startswith("## Comparison with a saved run")
    assert text.count(md_escape(PARTIAL)) == 1 and text.index("| mine") < text.index("| ce")
    assert "Unchanged in every measure: `fusion`, `e0`, `bg8`." in text
