"""directions.csv, Table II and Table III shapes and hand-computed contents."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fixtures.populations import annotate_population
from reports.tables import (RELIABLE_N, TABLE3_COLUMNS, directions_table, interval_note, pair_only_outcomes,
                            pair_only_summary, table3)


def annotated() -> pd.DataFrame:
    """Pair A eligible, pair B's q2 uncovered, pair C a conflict."""
    d = pd.DataFrame({
        "qid": ["A_q1", "A_q2", "B_q1", "B_q2", "C_q1", "C_q2"],
        "pair_id": ["A", "A", "B", "B", "C", "C"],
        "direction": [1, 2] * 3,
        "split": "test",
        "group": ["g1", "g1", "g2", "g2", "g3", "g3"],
        "preferred_pid": ["a1", "a2", "b1", "b2", "c1", "c2"],
        "counterpart_pid": ["a2", "a1", "b2", "b1", "c2", "c1"],
        "conflict": [False, False, False, False, True, True],
    })
    pool = pd.DataFrame({"qid": ["A_q1", "A_q1", "A_q2", "A_q2", "B_q1", "B_q1", "B_q2", "C_q1", "C_q1", "C_q2", "C_q2"],
                         "pid": ["a1", "a2", "a1", "a2", "b1", "b2", "b2", "c1", "c2", "c1", "c2"]})
    return annotate_population(d, pool)


def outcomes(strict: list[bool]) -> pd.DataFrame:
    return pd.DataFrame({"qid": ["A_q1", "A_q2", "B_q1"], "rank_pos": [1, 2, 5], "rank_neg": [2, 1, 7],
                         "strict": strict, "tie": [False, False, True], "fallback": [False, True, False]})


def test_directions_table_one_row_per_planned_direction_with_na():
    t = directions_table(annotated(), {"fusion": outcomes([True, False, False]), "ce": outcomes([True, True, False])})
    assert len(t) == 6
    assert list(t.columns[:10]) == ["qid", "pair_id", "direction", "split", "group", "preferred_pid",
                                    "counterpart_pid", "eligible", "conflict", "covered"]
    assert list(t.columns[10:15]) == ["fusion__strict", "fusion__rank_pos", "fusion__rank_neg", "fusion__tie",
                                      "fusion__fallback"]
    assert t["ce__strict"].tolist()[:3] == [True, True, False]
    assert t["fusion__rank_neg"].tolist()[:3] == [2, 1, 7]
    assert t.loc[3:, [c for c in t.columns if "__" in c]].isna().all().all()  # not eligible -> NA, not False/0
    assert t["eligible"].tolist() == [True, True, True, False, False, False]
    assert t["covered"].tolist() == [True, True, True, False, True, True]


def test_directions_table_rejects_outcomes_outside_q_c():
    bad = outcomes([True] * 3)
    bad.loc[2, "qid"] = "C_q1"
    with pytest.raises(ValueError, match="non-eligible qids.*C_q1"):
        directions_table(annotated(), {"x": bad})


def test_csv_round_trip_keeps_na(tmp_path):
    t = directions_table(annotated(), {"fusion": outcomes([True, False, False])})
    t.to_csv(tmp_path / "directions.csv", index=False)
    back = pd.read_csv(tmp_path / "directions.csv")
    assert back["fusion__strict"].isna().sum() == 3 and back["fusion__rank_pos"].sum() == 8


def test_pair_only_ties_and_unavailable_fail():
    d = annotated()  # eligible: A_q1, A_q2, B_q1
    pos = pd.Series({"A_q1": 2.0, "A_q2": 1.0, "B_q1": np.nan})
    neg = pd.Series({"A_q1": 1.0, "A_q2": 1.0, "B_q1": 0.0})
    o = pair_only_outcomes(d, pos, neg)
    assert o["strict"].tolist() == [True, False, False]
    assert o["tie"].tolist() == [False, True, False]
    assert o["unavailable"].tolist() == [False, False, True]
    assert pair_only_summary(o, "ce") == {"scorer": "ce", "n": 3, "strict": 1, "strict_pct": pytest.approx(100 / 3),
                                          "ties": 1, "unavailable": 1}
    # Array form aligned with all planned rows; a qid absent from a Series is unavailable.
    arr = pair_only_outcomes(d, [3, 3, 1, 9, 9, 9], [1, 3, np.inf, 0, 0, 0])
    assert arr["strict"].tolist() == [True, False, False] and arr["unavailable"].tolist() == [False, False, True]
    assert pair_only_outcomes(d, pos.drop("A_q1"), neg)["unavailable"].tolist() == [True, False, True]
    wrong = pair_only_outcomes(d, [0, 1, 5, 9, 9, 9], [3, 1, 1, 0, 0, 0]).iloc[0]  # A_q1 scored the wrong way round
    assert (wrong["strict"], wrong["tie"], wrong["unavailable"]) == (False, False, False)
    with pytest.raises(ValueError, match="aligned"):
        pair_only_outcomes(d, [1.0, 2.0], [1.0, 2.0])


def test_table3_merges_l1_and_l2():
    l1 = [{"scorer": "grader", "n": 10, "strict": 6, "strict_pct": 60.0, "ties": 3, "unavailable": 1},
          {"scorer": "ce", "n": 10, "strict": 7, "strict_pct": 70.0, "ties": 0, "unavailable": 0}]
    l2 = [{"ranker": "ce", "n": 10, "strict": 6, "strict_pct": 60.0},
          {"scorer": "grader", "n": 10, "strict": 8, "strict_pct": 80.0},
          {"ranker": "e0", "n": 10, "strict": 5, "strict_pct": 50.0}]
    t = table3(l1, l2)
    assert list(t.columns) == list(TABLE3_COLUMNS)
    assert t["scorer"].tolist() == ["grader", "ce", "e0"]
    assert t["l2_strict"].tolist() == [8, 6, 5]
    assert t.loc[2, ["l1_strict", "l1_ties"]].isna().all() and t.loc[2, "n"] == 10
    with pytest.raises(ValueError, match="different populations"):
        table3(l1, [{"scorer": "ce", "n": 9, "strict": 6, "strict_pct": 66.7}])


@pytest.mark.parametrize(("n", "lo", "hi", "note"), [
    (4, 100.0, 100.0, "(n=4: interval unreliable)"),  # 4 of 4 right on the CI subset's grader sample
    (19, 10.0, 30.0, "(n=19: interval unreliable)"),  # under RELIABLE_N directions
    (20, 10.0, 30.0, ""),
    (48, 0.0, 0.0, "(n=48: interval unreliable)"),  # zero width: every resample gave the same value
    (48, 20.0, 40.0, ""),
    (4, float("nan"), float("nan"), ""),  # no interval, nothing to warn about
])
def test_interval_note_marks_tiny_samples_and_zero_width_intervals(n, lo, hi, note) -> None:
    assert RELIABLE_N == 20
    assert interval_note(n, lo, hi) == note
