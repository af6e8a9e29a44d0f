"""Tie-branch analysis on a hand-made window (hand-computed shares)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from reports.table_registry import TABLES
from reports.tie_branch import tie_branch_table, tie_branches

#: tie_branch.csv's columns, in order (docs/protocol.md#outputs).
TIE_BRANCH_COLUMNS = TABLES["tie_branch"].columns

ELIGIBLE = pd.DataFrame({
    "qid": ["a", "b", "c", "d", "e"],
    "preferred_pid": ["p1", "p1", "p1", "p1", "p1"],
    "counterpart_pid": ["p2", "p2", "p2", "p2", "p2"],
})
# Reference ranks: e has its counterpart outside a k=2 window.
RANKS = pd.DataFrame({
    "qid": ["a", "a", "b", "b", "c", "c", "d", "d", "e", "e"],
    "pid": ["p1", "p2"] * 5,
    "rank": [1, 2, 2, 1, 1, 2, 1, 2, 1, 3],
})
SCORES = {("a", "p1"): 4, ("a", "p2"): 4,   # equal, double max
          ("b", "p1"): 4, ("b", "p2"): 4,   # equal, double max
          ("c", "p1"): 3, ("c", "p2"): 1,   # different
          ("d", "p1"): 1, ("d", "p2"): 2,   # different
          ("e", "p1"): 4}
OUTCOMES = pd.DataFrame({"qid": ["a", "b", "c", "d", "e"], "strict": [True, False, True, False, False]})


def test_branches_and_shares() -> None:
    per = tie_branches(ELIGIBLE, OUTCOMES, RANKS, SCORES, fallback=frozenset(), k=2)
    assert list(per["branch"]) == ["equal_score", "equal_score", "different_score", "different_score",
                                   "outside_window_or_fallback"]
    rows = {r["branch"]: r for r in tie_branch_table(per, "grader", 4.0)}
    eq = rows["equal_score"]
    # 2 of 5 directions (40%); 1 of 3 non-successes (33.3%); both graded 4 in 2 of 2 ties.
    assert (eq["directions"], eq["non_successes"], eq["double_max"]) == (2, 1, 2)
    assert abs(eq["directions_pct"] - 40.0) < 1e-9 and abs(eq["non_successes_pct"] - 100 / 3) < 1e-9
    assert eq["double_max_pct"] == 100.0
    assert rows["different_score"]["accuracy_pct"] == 50.0
    assert rows["different_score"]["double_max"] is None


def test_fallback_queries_leave_the_scored_branches() -> None:
    per = tie_branches(ELIGIBLE, OUTCOMES, RANKS, SCORES, fallback=frozenset({"a"}), k=2)
    assert per.set_index("qid").loc["a", "branch"] == "outside_window_or_fallback"


def test_expected_grade_splits_by_hand():
    """Four argmax ties (E[g] splits three: two rightly), one different-grade direction, one outside the window."""
    from reports.tie_branch import expected_grade_splits

    per = pd.DataFrame({"branch": ["equal_score"] * 4 + ["different_score", "outside_window_or_fallback"],
                        "strict": [True, False, False, True, True, False]})
    e_pos = np.array([2.9, 1.2, 3.0, 2.0, 3.5, np.nan])
    e_neg = np.array([2.1, 1.9, 2.5, 2.0, 1.0, 1.0])
    assert expected_grade_splits(per, e_pos, e_neg) == {
        "argmax_ties": 4, "split": 3, "split_right": 2, "fusion_right_on_split": 1,
        "still_tied": 1, "fusion_right_on_still_tied": 1}


def test_every_row_states_its_denominators() -> None:
    """Branch rows and the expected-grade rows divide by the same population and say by what."""
    from reports.tie_branch import expected_grade_rows

    per = tie_branches(ELIGIBLE, OUTCOMES, RANKS, SCORES, fallback=frozenset(), k=2)
    rows = tie_branch_table(per, "grader", 4.0)
    assert all(list(r) == list(TIE_BRANCH_COLUMNS) for r in rows)
    assert {(r["of_directions"], r["of_non_successes"], r["parent"]) for r in rows} == {(5, 3, "")}
    counts = {"argmax_ties": 2, "split": 1, "split_right": 1, "fusion_right_on_split": 0, "still_tied": 1,
              "fusion_right_on_still_tied": 1}
    # The expected-grade ranker fails on 1 of the same 5 directions.
    split, still = expected_grade_rows(counts, "grader_expected", of_directions=5, of_non_successes=1)
    assert list(split) == list(TIE_BRANCH_COLUMNS) and split["parent"] == still["parent"] == "equal_score"
    assert (split["directions"], split["directions_pct"], split["non_successes"], split["accuracy_pct"],
            split["tie_break_accuracy_pct"]) == (1, 20.0, 0, 100.0, 0.0)
    assert (still["directions"], still["directions_pct"], still["non_successes"], still["non_successes_pct"],
            still["accuracy_pct"]) == (1, 20.0, 0, 0.0, 100.0)
    # Together they are exactly the equal-score branch's directions.
    eq = next(r for r in rows if r["branch"] == "equal_score")
    assert split["directions"] + still["directions"] == eq["directions"] and split["of_directions"] == eq["of_directions"]
