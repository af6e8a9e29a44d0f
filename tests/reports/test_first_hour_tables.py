"""The first hour's report tables: rankers matched by name across runs, and every judgment flattened."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from reports.run_comparison import comparison_table
from reports.tables import JUDGMENTS_CSV_COLUMNS, judgments_table
from tests.reports.saved_runs import save, split_record


def t2(names: list[str], strict_pct: float) -> pd.DataFrame:
    return pd.DataFrame([{"ranker": n, "n": 10, "strict": 5, "strict_pct": strict_pct, "strict_pct_lo": 40.0,
                          "strict_pct_hi": 60.0, "mrr": 0.5, "mrr_lo": 0.4, "mrr_hi": 0.6, "paired_pct": 10.0,
                          "ties": 0, "fallback": 0} for n in names])


def directions(names: list[str]) -> pd.DataFrame:
    frame = pd.DataFrame({"qid": [f"q{i}" for i in range(10)], "group": [f"g{i // 2}" for i in range(10)]})
    return frame.assign(**{f"{n}__{f}": v for n in names for f, v in
                           (("strict", True), ("rank_pos", 1), ("rank_neg", 2), ("tie", False), ("fallback", False))})


def test_rankers_on_one_side_only_are_listed_and_never_compared(tmp_path: Path) -> None:
    old = split_record(tmp_path / "a", "test", t2(["fusion", "gone"], 50.0), directions(["fusion", "gone"]), {})
    save(tmp_path / "old", "run-old", {"test": old})
    now = split_record(tmp_path / "b", "test", t2(["fusion", "new"], 52.0), directions(["fusion", "new"]), {})
    table = comparison_table(tmp_path / "results", str(tmp_path / "old"), now)
    sides = table.drop_duplicates("ranker").set_index("ranker")["side"].to_dict()
    assert sides == {"fusion": "both", "new": "this run only", "gone": "saved run only"}
    fusion = table[(table["ranker"] == "fusion") & (table["measure"] == "strict_pct")].iloc[0]
    assert fusion["delta"] == 2.0
    assert table.loc[table["ranker"] == "new", "delta"].isna().all()
    gone = table[table["ranker"] == "gone"]
    assert len(gone) == 1 and gone.iloc[0]["measure"] == "(not compared)" and pd.isna(gone.iloc[0]["now"])


def test_judgments_are_flattened_one_row_per_input_with_reasons_and_probabilities() -> None:
    frame = pd.DataFrame({
        "qid": ["q1", "q1", "q1", "q2"], "pid": ["a", "b", "a", "c"], "score": [3.0, np.nan, 3.0, 1.0],
        "error": [None, "parse: 'three'", None, None],
        "usage": [{"grade_probs": [0.0, 0.0, 0.1, 0.6, 0.3], "grade_margin": 0.3, "near_tie": 0.0, "latency_s": 1.5},
                  {"latency_s": 2.0}, {"grade_probs": [0.0, 0.0, 0.1, 0.6, 0.3]},
                  {"seconds": 0.25, "seconds_shared": 1.0}],
        "raw": ["3", "three", "3", "1"], "cached": [False, False, False, True]})
    out = judgments_table(frame, "grader", "window", {("q1", "a"): 3.2, ("q2", "c"): 1.0}, bounded=True)
    assert list(out.columns) == list(JUDGMENTS_CSV_COLUMNS) and len(out) == 3  # the repeated (q1, a) once
    a, b, c = (out.iloc[i] for i in range(3))
    assert (a["score"], a["rule_score"], a["grade"], a["grade_margin"], a["near_tie"], a["seconds"]) == \
        (3.0, 3.2, 3.0, 0.3, False, 1.5)
    assert json.loads(a["grade_probs"]) == [0.0, 0.0, 0.1, 0.6, 0.3] and not a["unavailable"] and pd.isna(a["reason"])
    assert b["unavailable"] and b["reason"] == "parse: 'three'" and b["raw_if_unavailable"] == "three"
    assert np.isnan(b["rule_score"]) and pd.isna(b["near_tie"]) and pd.isna(b["grade_probs"])
    assert c["seconds"] == 0.25 and pd.isna(c["raw_if_unavailable"])
    unbounded = judgments_table(frame, "ce", "pair", {}, bounded=False)
    assert unbounded["grade"].isna().all()
