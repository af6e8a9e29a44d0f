"""Cost rows and cached-score replays on a hand-made pool."""
from __future__ import annotations

import numpy as np
import pandas as pd

from rankers.base import single_score_ranking
from reports.cost import judgments, margin_rule_queries, replay_rows, route_rule_queries, stage_cost

POOL = pd.DataFrame({
    "qid": ["a"] * 4 + ["b"] * 3,
    "pid": ["p1", "p2", "p3", "p4", "p1", "p2", "p3"],
    "dense_score": [0.9, 0.5, 0.4, np.nan, 0.6, 0.59, 0.3],
    "dense_rank": [1, 2, 3, np.nan, 1, 2, 3],
    "sparse_score": [1.0, np.nan, np.nan, 0.5, np.nan, np.nan, np.nan],
    "sparse_rank": [1, np.nan, np.nan, 2, np.nan, np.nan, np.nan],
    "bm25_score": [2.0, 1.0, np.nan, np.nan, 1.0, 3.0, np.nan],
    "bm25_rank": [1, 2, np.nan, np.nan, 2, 1, np.nan],
})
FUSED = np.array([0.9, 0.5, 0.4, 0.1, 0.6, 0.59, 0.3])


def test_rules_pick_queries() -> None:
    fusion = single_score_ranking(POOL, FUSED, "fusion")
    assert margin_rule_queries(fusion, margin=0.25) == {"b"}  # a leads by 0.4, b by 0.01
    assert route_rule_queries(POOL) == {"b"}  # a: all routes agree on p1; b: sparse empty, dense/bm25 disagree
    assert judgments(fusion, {"a", "b"}, k=3) == 6 and judgments(fusion, {"a"}, k=20) == 4


def test_replays_count_judgments_and_successes() -> None:
    fusion = single_score_ranking(POOL, FUSED, "fusion")
    scores = {("a", p): s for p, s in zip(["p1", "p2", "p3", "p4"], [1.0, 3.0, 2.0, 0.0])}
    scores |= {("b", p): s for p, s in zip(["p1", "p2", "p3"], [0.0, 1.0, 2.0])}

    def strict_of(r):  # success when p3 is first
        top = r.frame[r.frame["rank"] == 1].set_index("qid")["pid"]
        return int((top == "p3").sum()), 2

    rows = {r["stage"]: r for r in replay_rows(fusion, scores, POOL, strict_of, k_full=20, k_small=2)}
    assert rows["replay_k20"]["strict"] == 1 and rows["replay_k20"]["judgments"] == 7  # b's p3 wins; a's p2 wins
    assert rows["replay_k2"]["judgments"] == 4 and rows["replay_k2"]["strict"] == 0
    assert rows["rule_fusion_margin"]["judgments"] == 3
    assert abs(rows["rule_fusion_margin"]["judgments_saved_pct"] - 100 * 4 / 7) < 1e-9


def test_stage_cost_sums_unique_inputs() -> None:
    frame = pd.DataFrame({
        "qid": ["a", "a", "a"], "pid": ["p1", "p2", "p1"], "score": [3.0, np.nan, 3.0],
        "usage": [{"input_tokens": 10, "output_tokens": 1, "latency_s": 0.5}, {"input_tokens": 12, "latency_s": 0.25},
                  {"input_tokens": 10, "output_tokens": 1, "latency_s": 0.5}],
    })
    row = stage_cost("grader_window", frame)
    assert (row["judgments"], row["requests"], row["unavailable"]) == (3, 2, 1)
    assert (row["input_tokens"], row["output_tokens"], row["wall_s"]) == (22.0, 1.0, 0.75)


def test_judgment_cost_counts_model_judgments_not_inputs() -> None:
    """A listwise or pairwise judge: judgments are the uses, requests the distinct judgments (each made once)."""
    frame = pd.DataFrame({"qid": ["a", "a", "b", "b"], "pid": ["p1", "p2", "p1", "p2"],
                          "score": [1.0, 0.0, np.nan, np.nan]})
    calls = pd.DataFrame({"key": ["k1", "k2", "k1", "k3"], "available": [True, True, True, False],
                          "input_tokens": [300.0, 310.0, 300.0, np.nan], "output_tokens": [0.0, 0.0, 0.0, np.nan],
                          "latency_s": [1.0, 0.5, 1.0, 2.0]})
    row = stage_cost("pw_window", frame, calls)
    assert (row["judgments"], row["requests"], row["unavailable"], row["fallback_windows"]) == (4, 3, 1, 1)
    assert (row["input_tokens"], row["output_tokens"], row["wall_s"]) == (610.0, 0.0, 3.5)
    assert (row["windows"], row["wall_s_per_window"], row["wall_s_per_judgment"]) == (2, 1.75, 3.5 / 3)
