"""Run history and comparisons: every published run's tables are kept under a run id and can be compared.

``results/.history/<run id>/<split>/`` keeps the small files of each published run (tables,
manifest, report; not the large runs or pool), so a code change that moves a number is
visible: ``--compare-to <run id | results dir>`` prints Δ per ranker and measure, flagging
differences that fall outside this run's 95% bootstrap interval. The paper's published
values ride along as a labeled reference column for Test.
"""
from __future__ import annotations

import os
import re
import secrets
import shutil
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from reports.paper import paper_table2

HISTORY = ".history"
KEEP = ("*.csv", "*.json", "*.md", "*.tex")
#: Table II measures compared across runs, with the interval columns that bound "noise".
COMPARED = {"strict_pct": ("strict_pct_lo", "strict_pct_hi"), "mrr": ("mrr_lo", "mrr_hi"),
            "paired_pct": ("paired_pct_lo", "paired_pct_hi"), "n": (None, None), "strict": (None, None),
            "ties": (None, None), "fallback": (None, None)}
COMPARISON_COLUMNS = ("ranker", "measure", "now", "then", "delta", "now_lo", "now_hi", "outside_interval", "paper")


def run_id(tables: dict[str, dict[str, pd.DataFrame]]) -> str:
    """``<UTC time to the microsecond>-<commit>-<profile>-<scope>-<pid><random>`` from the manifest rows of any
    split: sortable by time, readable, and unique across processes started together (pid and random bits)."""
    manifest: dict[str, object] = {}
    for split_tables in tables.values():
        if "manifest" in split_tables:
            manifest.update(dict(zip(split_tables["manifest"]["key"], split_tables["manifest"]["value"])))
    commit = str(manifest.get("code_commit", "nocommit"))[:8]
    profile = manifest.get("profile", {}).get("name", "profile") if isinstance(manifest.get("profile"), dict) else "profile"
    scope = str(manifest.get("scope", "run"))
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    unique = f"{os.getpid()}{secrets.token_hex(3)}"
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", f"{stamp}-{commit}-{profile}-{scope}-{unique}")


def save_to_history(results_dir: Path, ident: str, split: str, published: Path) -> Path:
    """Copy a published split's small files into the history under the run id."""
    target = Path(results_dir) / HISTORY / ident / split
    target.mkdir(parents=True, exist_ok=True)
    for pattern in KEEP:
        for path in published.glob(pattern):
            shutil.copyfile(path, target / path.name)
    return target


def _locate(results_dir: Path, other: str, split: str) -> Path:
    """The table2.csv of a run id in the history, or of another results directory (or its split folder)."""
    candidates = [Path(results_dir) / HISTORY / other / split / "table2.csv", Path(other) / split / "table2.csv",
                  Path(other) / "table2.csv"]
    for path in candidates:
        if path.is_file():
            return path
    known = sorted(p.name for p in (Path(results_dir) / HISTORY).glob("*")) if (Path(results_dir) / HISTORY).is_dir() else []
    raise FileNotFoundError(f"--compare-to {other!r}: no {split}/table2.csv as a saved run id or a results "
                            f"directory; saved runs: {known[-5:]}")


def compare_tables(now: pd.DataFrame, then: pd.DataFrame, split: str) -> pd.DataFrame:
    """Δ per ranker and measure between two Table IIs, flagged when outside this run's interval."""
    paper = paper_table2(split)
    paper_rows = paper.set_index("ranker") if paper is not None else None
    then_rows = then.set_index("ranker")
    rows = []
    for _, row in now.iterrows():
        name = row["ranker"]
        for measure, (lo_col, hi_col) in COMPARED.items():
            if measure not in now.columns:
                continue
            old = then_rows.at[name, measure] if name in then_rows.index and measure in then_rows.columns else np.nan
            lo = row.get(lo_col, np.nan) if lo_col else np.nan
            hi = row.get(hi_col, np.nan) if hi_col else np.nan
            value = row[measure]
            outside = bool(pd.notna(old) and pd.notna(lo) and not (lo <= old <= hi))
            ref = np.nan
            if paper_rows is not None and name in paper_rows.index and measure in paper_rows.columns:
                ref = paper_rows.at[name, measure]
            rows.append({"ranker": name, "measure": measure, "now": value, "then": old,
                         "delta": value - old if pd.notna(old) and pd.notna(value) else np.nan,
                         "now_lo": lo, "now_hi": hi, "outside_interval": outside, "paper": ref})
    return pd.DataFrame(rows, columns=list(COMPARISON_COLUMNS))


def compare_runs(results_dir: Path, other: str, split: str, table2: pd.DataFrame | None) -> pd.DataFrame:
    """This run's Table II against a saved run or another results directory."""
    if table2 is None:
        return pd.DataFrame(columns=list(COMPARISON_COLUMNS))
    return compare_tables(table2, pd.read_csv(_locate(results_dir, other, split)), split)


