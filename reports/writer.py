"""Writing one split's report: CSV + JSON per table, LaTeX Table II, report.md, figures, manifest.

Kept apart from the plugin so the same files can be regenerated from saved tables
(or from caches) without running pytest.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from reports.tables import TABLES

#: Columns shown in the terminal and in report.md for the wide tables.
BRIEF_COLUMNS = {
    "table2": ["ranker", "n", "strict", "strict_pct", "paired_pct", "mrr", "pref_at_1", "pref_at_3", "pref_at_10",
               "mean_rank_pos", "mean_rank_neg", "both_top10", "ties", "fallback", "delta_pts", "delta_lo", "delta_hi"],
}


def _brief(table: str, frame: pd.DataFrame) -> pd.DataFrame:
    cols = [c for c in BRIEF_COLUMNS.get(table, list(frame.columns)) if c in frame.columns]
    return frame[cols]


def terminal_tables(table: str, frame: pd.DataFrame) -> str:
    """Fixed-width text of a table for the pytest terminal summary."""
    return _brief(table, frame).to_string(index=False, float_format=lambda v: f"{v:.4g}", na_rep="–")


def table2_latex(frame: pd.DataFrame) -> str:
    """Table II as a LaTeX tabular a researcher can paste (booktabs)."""
    cols = ["ranker", "strict_pct", "paired_pct", "pref_at_1", "pref_at_3", "pref_at_10", "mrr", "ties", "fallback"]
    out = frame[[c for c in cols if c in frame.columns]].copy()
    if {"delta_pts", "delta_lo", "delta_hi"} <= set(frame.columns):
        out["delta"] = [
            "--" if pd.isna(d) else f"{d:+.2f} [{lo:.2f}, {hi:.2f}]"
            for d, lo, hi in zip(frame["delta_pts"], frame["delta_lo"], frame["delta_hi"])
        ]
    return out.to_latex(index=False, float_format=lambda v: f"{v:.2f}" if abs(v) >= 1 else f"{v:.4f}", escape=True)


def write_split_report(out_dir: Path, split: str, tables: dict[str, pd.DataFrame]) -> None:
    """Write every table of one split and the report that gathers them."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, frame in tables.items():
        if name == "manifest":
            continue
        frame.to_csv(out_dir / f"{name}.csv", index=False)
        frame.to_json(out_dir / f"{name}.json", orient="records", indent=1)
    if "table2" in tables:
        (out_dir / "table2.tex").write_text(table2_latex(tables["table2"]), encoding="utf-8")
    if "manifest" in tables:
        write_manifest(out_dir, tables["manifest"])
    from reports.outputs import assemble_directions_csv
    from reports.figures import write_figures

    assemble_directions_csv(out_dir, list(tables["table2"]["ranker"]) if "table2" in tables else [])
    figures = write_figures(out_dir, tables)
    lines = [f"# Preference Is Not Position — {split}", ""]
    for name in TABLES:
        if name in tables and name != "manifest":
            lines += [f"## {TABLES[name][0]}", "", _brief(name, tables[name]).to_markdown(index=False, floatfmt=".4g"), ""]
    for fig in figures:
        lines += [f"![{fig.stem}]({fig.name})", ""]
    (out_dir / "report.md").write_text("\n".join(lines), encoding="utf-8")


def write_manifest(out_dir: Path, frame: pd.DataFrame) -> None:
    """Merge manifest entries (key -> JSON value) recorded by specs into manifest.json."""
    path = out_dir / "manifest.json"
    manifest = dict(zip(frame["key"], frame["value"]))
    stages = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted((out_dir / "stages").glob("*.json"))}
    if stages:
        manifest["stages_wall_clock"] = stages
    path.write_text(json.dumps(manifest, indent=1, sort_keys=True, default=str), encoding="utf-8")
