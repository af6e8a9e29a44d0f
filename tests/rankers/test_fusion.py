"""Fixed fusion (docs/protocol.md#fusion) against hand-computed numbers, one rule at a time."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from rankers.fusion import FUSION_RULES, fusion_ranking, fusion_scores

NAN = float("nan")


def pool(rows: list[tuple]) -> pd.DataFrame:
    """Pool frame from (qid, pid, dense, sparse, bm25) raw scores; ranks are irrelevant to fusion."""
    frame = pd.DataFrame(rows, columns=["qid", "pid", "dense_score", "sparse_score", "bm25_score"])
    for route in ("dense", "sparse", "bm25"):
        frame[f"{route}_rank"] = frame.groupby("qid")[f"{route}_score"].rank(ascending=False, method="first")
    return frame


def scores_by_pid(frame: pd.DataFrame) -> dict[tuple[str, str], float]:
    return dict(zip(zip(frame["qid"], frame["pid"]), fusion_scores(frame)))


def test_constants_are_the_spec_values():
    assert [(r.route, r.threshold, r.log1p, r.weight) for r in FUSION_RULES] == [
        ("dense", 0.30, False, 0.70), ("sparse", 0.20, True, 0.15), ("bm25", 0.0, True, 0.15)]


def test_all_routes_active_with_min_max_single_retained_and_dropped_passages():
    frame = pool([
        ("q", "a", 0.9, 3.0, 5.0),
        ("q", "b", 0.5, 0.1, NAN),   # sparse below 0.20: filtered, contributes 0
        ("q", "c", 0.2, NAN, 1.0),   # dense below 0.30: filtered
        ("q", "d", 0.25, NAN, NAN),  # no surviving route score at all
        ("q", "e", 0.6, NAN, 2.0),
    ])
    got = scores_by_pid(frame)
    # dense retained {a .9, b .5, e .6} -> a 1, b 0, e .25; sparse retained {a} alone -> 1.0;
    # bm25 log1p {a ln6, c ln2, e ln3} -> a 1, c 0, e (ln3-ln2)/(ln6-ln2); weights sum to 1.
    e_bm25 = (math.log(3) - math.log(2)) / (math.log(6) - math.log(2))
    assert got[("q", "a")] == pytest.approx(1.0)
    assert got[("q", "b")] == pytest.approx(0.0)
    assert got[("q", "c")] == pytest.approx(0.0)
    assert got[("q", "d")] == 0.0
    assert got[("q", "e")] == pytest.approx(0.70 * 0.25 + 0.15 * e_bm25)
    assert got[("q", "e")] == pytest.approx(0.23036053696428138)


def test_empty_route_renormalizes_weights_over_active_routes():
    frame = pool([
        ("r", "x", 0.8, NAN, 0.5),
        ("r", "y", 0.4, 0.1, 1.5),  # the only sparse score is filtered: sparse inactive for this query
    ])
    got = scores_by_pid(frame)
    # dense x 1, y 0; bm25 log1p(.5) < log1p(1.5) -> x 0, y 1; weights .70 and .15 over .85
    assert got[("r", "x")] == pytest.approx(0.70 / 0.85)
    assert got[("r", "y")] == pytest.approx(0.15 / 0.85)


def test_all_equal_retained_scores_give_one_each_and_no_retained_gives_zero():
    frame = pool([
        ("s", "a", 0.5, NAN, NAN),
        ("s", "b", 0.5, NAN, NAN),
        ("z", "a", 0.1, 0.05, NAN),  # nothing retained in any route
    ])
    got = scores_by_pid(frame)
    assert got[("s", "a")] == pytest.approx(1.0)
    assert got[("s", "b")] == pytest.approx(1.0)
    assert got[("z", "a")] == 0.0


def test_thresholds_are_inclusive_and_on_raw_scores():
    frame = pool([
        ("t", "a", 0.30, 0.20, 0.0),     # every route exactly at its threshold: all retained
        ("t", "b", 0.29999, 0.19999, NAN),
        ("t", "c", 0.40, 0.50, 3.0),
    ])
    got = scores_by_pid(frame)
    # dense {a .30, c .40}: a 0, c 1; sparse log1p {a .2, c .5}: a 0, c 1; bm25 log1p {a 0, c 3}: a 0, c 1
    assert got[("t", "a")] == pytest.approx(0.0)
    assert got[("t", "b")] == 0.0
    assert got[("t", "c")] == pytest.approx(1.0)
    # log1p is applied after thresholding: a sparse raw score of 0.2 stays (log1p(0.2) = 0.18 < 0.2)
    one_sparse = pool([("u", "a", NAN, 0.2, NAN), ("u", "b", NAN, 0.9, NAN), ("u", "c", NAN, 0.55, NAN)])
    mid = (math.log1p(0.55) - math.log1p(0.2)) / (math.log1p(0.9) - math.log1p(0.2))
    assert scores_by_pid(one_sparse)[("u", "c")] == pytest.approx(mid)


def test_queries_are_independent_and_row_order_does_not_matter():
    frame = pool([
        ("q1", "a", 0.9, NAN, 1.0), ("q1", "b", 0.5, 0.3, NAN),
        ("q2", "a", 0.31, NAN, NAN), ("q2", "c", 0.95, 2.0, 4.0),
    ])
    base = scores_by_pid(frame)
    shuffled = frame.sample(frac=1.0, random_state=3).reset_index(drop=True)
    assert scores_by_pid(shuffled) == pytest.approx(base)
    # q1 alone gives the same numbers: no leakage across queries
    assert scores_by_pid(frame[frame["qid"] == "q1"].reset_index(drop=True)) == pytest.approx(
        {k: v for k, v in base.items() if k[0] == "q1"})


def test_fusion_ranking_orders_by_score_and_breaks_ties_by_pid_for_position_only():
    frame = pool([
        ("q", "b", 0.5, NAN, NAN),
        ("q", "a", 0.5, NAN, NAN),   # ties b (both 1.0)
        ("q", "c", 0.1, NAN, NAN),   # 0
    ])
    ranking = fusion_ranking(frame)
    assert ranking.name == "fusion"
    out = ranking.frame.set_index("pid")
    assert out["rank"].to_dict() == {"a": 1, "b": 2, "c": 3}
    assert out.loc["a", "k0"] == out.loc["b", "k0"] == pytest.approx(1.0)
    assert np.isfinite(ranking.frame[["k0", "k1", "k2"]].to_numpy()).all()


def test_a_declared_fusion_variant_changes_only_what_it_names():
    from rankers.fusion import FUSION_RULES, declared_rules

    assert declared_rules() == FUSION_RULES
    rules = {r.route: r for r in declared_rules({"dense": 0.6}, {"bm25": 1.5})}
    assert rules["dense"].weight == 0.6 and rules["sparse"].weight == 0.15 and rules["bm25"].threshold == 1.5
    with pytest.raises(ValueError, match="unknown routes \\['colbert'\\]"):
        declared_rules({"colbert": 1.0})
