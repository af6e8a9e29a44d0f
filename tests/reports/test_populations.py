"""Q_c and Table I on hand-made directions and on the real study with a synthetic pool."""
from __future__ import annotations

import pandas as pd
import pytest

from fixtures.study import build_study
from fixtures.populations import annotate_population, eligible_directions
from reports.populations import table1_row


def toy_directions() -> pd.DataFrame:
    """Pairs A, B (group g1), C (g2), D (g3, a structural conflict on both sides)."""
    rows = []
    for pair, group, conflict in (("A", "g1", False), ("B", "g1", False), ("C", "g2", False), ("D", "g3", True)):
        p1, p2 = f"{pair.lower()}1", f"{pair.lower()}2"
        rows.append((f"{pair}_q1", pair, 1, "test", p1, p2, group, group if pair != "B" else "gB", conflict))
        rows.append((f"{pair}_q2", pair, 2, "test", p2, p1, group, group if pair != "B" else "gB", conflict))
    return pd.DataFrame(rows, columns=["qid", "pair_id", "direction", "split", "preferred_pid", "counterpart_pid",
                                       "group", "group_rules", "conflict"])


def toy_pool() -> pd.DataFrame:
    """Every designated passage retrieved except c1 for C_q2 (so C is an incomplete pair)."""
    d = toy_directions()
    rows = [(q, p) for q, a, b in zip(d["qid"], d["preferred_pid"], d["counterpart_pid"]) for p in (a, b, "x")]
    pool = pd.DataFrame(rows, columns=["qid", "pid"])
    return pool[~((pool["qid"] == "C_q2") & (pool["pid"] == "c1"))].sort_values(["qid", "pid"]).reset_index(drop=True)


def test_annotation_flags_by_hand():
    a = annotate_population(toy_directions(), toy_pool()).set_index("qid")
    assert a["covered"].to_dict() == {"A_q1": True, "A_q2": True, "B_q1": True, "B_q2": True,
                                      "C_q1": True, "C_q2": False, "D_q1": True, "D_q2": True}
    assert a.index[a["eligible"]].tolist() == ["A_q1", "A_q2", "B_q1", "B_q2", "C_q1"]
    assert a.index[a["complete"]].tolist() == ["A_q1", "A_q2", "B_q1", "B_q2"]


def test_table1_row_by_hand():
    row = table1_row(annotate_population(toy_directions(), toy_pool()), "test")
    assert row == {"split": "test", "planned_directions": 8, "planned_pairs": 4, "conflicts": 2, "planned_groups": 3,
                   "covered": 7, "eligible": 5, "groups": 2, "complete_pairs": 2, "incomplete_eligible": 1,
                   "group_rules": 3}


def test_without_pool_only_planned_counts():
    d = annotate_population(toy_directions(), None)
    assert not {"covered", "eligible", "complete"} & set(d.columns)
    row = table1_row(d, "test")
    assert row == {"split": "test", "planned_directions": 8, "planned_pairs": 4, "conflicts": 2, "planned_groups": 3}
    with pytest.raises(ValueError, match="annotate"):
        eligible_directions(d)


def test_other_split_has_no_sensitivity_groups_and_unknown_split_fails():
    d = toy_directions().assign(split="confirmation")
    assert table1_row(annotate_population(d, toy_pool()), "confirmation")["group_rules"] is None
    with pytest.raises(ValueError, match="no planned directions for split 'test'"):
        table1_row(annotate_population(d, toy_pool()), "test")


def test_pool_of_another_qid_does_not_cover():
    pool = toy_pool()
    pool.loc[pool["qid"] == "A_q1", "qid"] = "Z_q9"  # A_q1's passages retrieved, but for another query
    a = annotate_population(toy_directions(), pool).set_index("qid")
    assert not a.at["A_q1", "covered"] and not a.at["A_q2", "complete"] and a.at["A_q2", "eligible"]


def test_missing_columns_are_named():
    with pytest.raises(ValueError, match="conflict"):
        annotate_population(toy_directions().drop(columns="conflict"), toy_pool())
    with pytest.raises(ValueError, match="pid"):
        annotate_population(toy_directions(), toy_pool().rename(columns={"pid": "doc"}))


@pytest.fixture(scope="module")
def test_split() -> pd.DataFrame:
    return build_study().split("test")


def test_real_test_split_full_pool(test_split):
    pool = pd.concat([test_split[["qid", "preferred_pid"]].set_axis(["qid", "pid"], axis=1),
                      test_split[["qid", "counterpart_pid"]].set_axis(["qid", "pid"], axis=1)])
    row = table1_row(annotate_population(test_split, pool), "test")
    # The 2 conflicts are the two directions of pair 1314-2, whose group keeps pair 1314-3: no group is lost.
    assert row == {"split": "test", "planned_directions": 2766, "planned_pairs": 1383, "conflicts": 2,
                   "planned_groups": 700, "covered": 2766, "eligible": 2764, "groups": 700, "complete_pairs": 1382,
                   "incomplete_eligible": 0, "group_rules": 698}


def test_groups_counted_over_eligible_only(test_split):
    # Retrieve nothing for group 1314-2's other pair (1314-3): with the conflicts gone the whole group vanishes.
    pool = pd.concat([test_split[["qid", "preferred_pid"]].set_axis(["qid", "pid"], axis=1),
                      test_split[["qid", "counterpart_pid"]].set_axis(["qid", "pid"], axis=1)])
    pool = pool[~pool["qid"].str.startswith("1314-3_")]
    row = table1_row(annotate_population(test_split, pool), "test")
    assert (row["planned_groups"], row["groups"], row["eligible"], row["complete_pairs"]) == (700, 699, 2762, 1381)


def test_real_test_split_with_gaps(test_split):
    pool = pd.concat([test_split[["qid", "preferred_pid"]].set_axis(["qid", "pid"], axis=1),
                      test_split[["qid", "counterpart_pid"]].set_axis(["qid", "pid"], axis=1)])
    # Drop the counterpart of the q1 direction of the first 10 non-conflict pairs, and both of the 11th pair.
    pairs = test_split.loc[~test_split["conflict"], "pair_id"].drop_duplicates().head(11).tolist()
    gone = {f"{p}_q1" for p in pairs[:10]} | {f"{pairs[10]}_q1", f"{pairs[10]}_q2"}
    drop = pool["qid"].isin(gone) & pool["pid"].isin(test_split.loc[test_split["qid"].isin(gone), "counterpart_pid"])
    row = table1_row(annotate_population(test_split, pool[~drop]), "test")
    assert (row["covered"], row["eligible"], row["complete_pairs"], row["incomplete_eligible"]) == (2754, 2752, 1371, 10)
