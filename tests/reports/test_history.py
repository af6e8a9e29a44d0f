"""Run history and comparisons: Δ per ranker and measure, flagged outside this run's interval."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from reports.history import compare_runs, compare_tables, run_id, save_to_history


def table(strict_pct: float, mrr: float, lo: float = 49.0, hi: float = 52.0) -> pd.DataFrame:
    return pd.DataFrame([{"ranker": "fusion", "n": 2735, "strict": round(strict_pct * 27.35), "strict_pct": strict_pct,
                          "strict_pct_lo": lo, "strict_pct_hi": hi, "mrr": mrr, "mrr_lo": mrr - 0.01,
                          "mrr_hi": mrr + 0.01, "paired_pct": 10.0, "ties": 24, "fallback": 0}])


def test_a_difference_inside_the_interval_is_not_flagged_and_one_outside_is() -> None:
    now = table(50.71, 0.5242)
    rows = compare_tables(now, table(50.50, 0.5242), "test").set_index("measure")
    assert rows.at["strict_pct", "delta"] == pytest.approx(0.21) and not rows.at["strict_pct", "outside_interval"]
    rows = compare_tables(now, table(48.50, 0.5000), "test").set_index("measure")
    assert rows.at["strict_pct", "outside_interval"] and rows.at["mrr", "outside_interval"]
    assert rows.at["strict_pct", "paper"] == pytest.approx(52.30)  # the published value rides along on Test
    assert pd.isna(compare_tables(now, table(48.5, 0.5), "confirmation").set_index("measure").at["mrr", "paper"])


def test_history_keeps_small_files_under_the_run_id_and_compares_by_id(tmp_path: Path) -> None:
    published = tmp_path / "results" / "test"
    published.mkdir(parents=True)
    table(50.0, 0.5).to_csv(published / "table2.csv", index=False)
    (published / "runs").mkdir()
    (published / "runs" / "fusion.trec").write_text("q Q0 p 1 1 fusion\n")
    ident = run_id({"test": {"manifest": pd.DataFrame([{"key": "code_commit", "value": "abcdef123456"},
                                                       {"key": "profile", "value": {"name": "embedded"}},
                                                       {"key": "scope", "value": "full"}])}})
    assert "abcdef12-embedded-full" in ident
    saved = save_to_history(tmp_path / "results", ident, "test", published)
    assert (saved / "table2.csv").is_file() and not (saved / "runs").exists()
    rows = compare_runs(tmp_path / "results", ident, "test", table(51.0, 0.52)).set_index("measure")
    assert rows.at["strict_pct", "then"] == 50.0 and rows.at["strict_pct", "now"] == 51.0
    with pytest.raises(FileNotFoundError, match="no test/table2.csv"):
        compare_runs(tmp_path / "results", "no-such-run", "test", table(51.0, 0.52))
