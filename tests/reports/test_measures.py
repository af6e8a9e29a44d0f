"""Preference and position measures on tiny hand-made rankings, every expectation computed by hand."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from fixtures.populations import annotate_population
from rankers.base import Ranking, rank_by_keys
from scipy.stats import norm

from reports import measures
from reports.bootstrap import Ratio, group_bootstrap
from reports.columns import PairMeasure
from reports.measures import (BASELINE_MEASURES, DIRECTION_MEASURES, INTERVAL_MEASURES, PAIRED_MEASURES, TABLE2,
                              TABLE2_COLUMNS, TABLE2_INTERVAL_COLUMNS, TABLE2_ROW_COLUMNS, paired_measure, summarize)
from reports.outcomes import corrections_regressions, direction_outcomes


def toy_directions() -> pd.DataFrame:
    """Pairs A, B (group g1), C (g2; C_q2 not covered), D (g3; structural conflict)."""
    rows = []
    for pair, group, conflict in (("A", "g1", False), ("B", "g1", False), ("C", "g2", False), ("D", "g3", True)):
        p1, p2 = f"{pair.lower()}1", f"{pair.lower()}2"
        rows.append((f"{pair}_q1", pair, 1, "test", p1, p2, group, group, conflict))
        rows.append((f"{pair}_q2", pair, 2, "test", p2, p1, group, group, conflict))
    return pd.DataFrame(rows, columns=["qid", "pair_id", "direction", "split", "preferred_pid", "counterpart_pid",
                                       "group", "group_rules", "conflict"])


FILLERS = [f"f{i:02d}" for i in range(10)]
#: (qid, pid, k0, k1, k2). Hand-derived positions in the comments (ties by pid ascending).
KEYS = [
    # A_q1: (1,3,0.2) > (1,3,0.1) > (0,0,0.9): a1 rank 1, a2 rank 2 -> strict.
    ("A_q1", "a1", 1, 3, 0.2), ("A_q1", "a2", 1, 3, 0.1), ("A_q1", "x", 0, 0, 0.9), ("A_q1", "y", 0, 0, 0.5),
    # A_q2: a1 and a2 tie at (0,0,0.9); x first; a1 before a2 by id only -> pos a2 rank 3, neg a1 rank 2, tie.
    ("A_q2", "a1", 0, 0, 0.9), ("A_q2", "a2", 0, 0, 0.9), ("A_q2", "x", 1, 2, 0.0), ("A_q2", "y", 0, 0, 0.1),
    # B_q1: ten fillers above both: b1 rank 11 over b2 rank 12 -> strict, but outside the top 10.
    *[("B_q1", f, 0, 0, 0.9) for f in FILLERS], ("B_q1", "b1", 0, 0, 0.2), ("B_q1", "b2", 0, 0, 0.1),
    # B_q2: second key decides: b2 (0,5,0) > b1 (0,4,0.9) -> ranks 1 and 2, strict.
    ("B_q2", "b1", 0, 4, 0.9), ("B_q2", "b2", 0, 5, 0.0), ("B_q2", "f00", 0, 0, 0.9),
    # C_q1: f first, c2 rank 2, c1 rank 3 -> failure; C_q1 is a fallback query.
    ("C_q1", "c1", 0, 0, 0.4), ("C_q1", "c2", 0, 0, 0.6), ("C_q1", "f00", 1, 0, 0.0),
    # C_q2 lacks c1 (not covered); D is a conflict (not eligible) but ranked anyway.
    ("C_q2", "c2", 0, 0, 0.5), ("C_q2", "f00", 0, 0, 0.1),
    ("D_q1", "d1", 0, 0, 0.3), ("D_q1", "d2", 0, 0, 0.1), ("D_q2", "d1", 0, 0, 0.3), ("D_q2", "d2", 0, 0, 0.1),
]


def toy_ranking(name: str = "toy") -> Ranking:
    frame = pd.DataFrame(KEYS, columns=["qid", "pid", "k0", "k1", "k2"])
    return rank_by_keys(frame, name, fallback=frozenset({"C_q1"}))


@pytest.fixture
def directions() -> pd.DataFrame:
    pool = pd.DataFrame(KEYS, columns=["qid", "pid", "k0", "k1", "k2"])[["qid", "pid"]]
    return annotate_population(toy_directions(), pool)


def ref_outcomes(strict: list[bool], name: str = "ref") -> pd.DataFrame:
    """Reference outcomes for the 5 eligible directions (only ``strict`` matters to deltas)."""
    o = pd.DataFrame({"qid": ["A_q1", "A_q2", "B_q1", "B_q2", "C_q1"], "rank_pos": 1, "rank_neg": 2,
                      "strict": strict, "tie": False, "fallback": False})
    o.attrs["ranker"] = name
    return o


def test_lexicographic_keys_and_ties_are_failures(directions):
    o = direction_outcomes(toy_ranking(), directions).set_index("qid")
    assert o.index.tolist() == ["A_q1", "A_q2", "B_q1", "B_q2", "C_q1"]
    assert o["strict"].tolist() == [True, False, True, True, False]
    assert o["tie"].tolist() == [False, True, False, False, False]
    assert o["rank_pos"].tolist() == [1, 3, 11, 1, 3]
    assert o["rank_neg"].tolist() == [2, 2, 12, 2, 2]
    assert o["fallback"].tolist() == [False, False, False, False, True]


def test_identifier_order_never_creates_success(directions):
    # Flip A_q2's designation: now the preferred passage a1 sits above a2 only by id; still a tie, not a success.
    d = directions.copy()
    d.loc[d["qid"] == "A_q2", ["preferred_pid", "counterpart_pid"]] = ["a1", "a2"]
    o = direction_outcomes(toy_ranking(), d).set_index("qid")
    assert (o.at["A_q2", "rank_pos"], o.at["A_q2", "rank_neg"]) == (2, 3)
    assert not o.at["A_q2", "strict"] and o.at["A_q2", "tie"]


def test_summarize_by_hand(directions):
    row = summarize(direction_outcomes(toy_ranking(), directions), directions)
    assert list(row) == list(TABLE2_ROW_COLUMNS) and list(row)[:len(TABLE2_COLUMNS)] == list(TABLE2_COLUMNS)
    expected = {
        "ranker": "toy", "n": 5, "strict": 3, "strict_pct": 60.0,
        "paired": 1, "paired_n": 2, "paired_pct": 50.0,  # complete pairs A (q2 tie) and B (both strict); C incomplete
        "mrr": (1 + 1 / 3 + 1 / 11 + 1 + 1 / 3) / 5,  # = 91/165
        "pref_at_1": 40.0, "pref_at_3": 80.0, "pref_at_10": 80.0,
        "mean_rank_pos": 19 / 5, "mean_rank_neg": 20 / 5, "both_top10": 4, "ties": 1, "fallback": 1,
    }
    for key, value in expected.items():
        assert row[key] == pytest.approx(value) if isinstance(value, float) else row[key] == value, key
    assert row["mrr"] == pytest.approx(91 / 165)
    assert all(math.isnan(row[k]) for k in ("delta_pts", "delta_lo", "delta_hi", "delta_mrr", "delta_mrr_lo",
                                            "delta_mrr_hi", "mde_pts", "se_delta_pts", "se_delta_mrr", "mde_mrr"))


def test_delta_and_corrections_vs_reference(directions):
    ours = direction_outcomes(toy_ranking(), directions)
    ref = ref_outcomes([False, True, False, False, False])
    row = summarize(ours, directions, baseline=ref, n_resamples=500, seed=3)
    assert row["delta_pts"] == pytest.approx(40.0)  # 3/5 - 1/5
    assert row["delta_lo"] <= row["delta_pts"] <= row["delta_hi"]
    # Groups: g1 = A, B (gains +1 -1 +1 +1 = +2); g2 = C_q1 (0).
    assert corrections_regressions(ours, ref, directions) == {
        "corrections": 3, "regressions": 1, "groups_positive": 1, "groups_zero": 1, "groups_negative": 0}
    worse = ref_outcomes([True, True, True, True, True])
    assert corrections_regressions(ours, worse, directions) == {
        "corrections": 0, "regressions": 2, "groups_positive": 0, "groups_zero": 0, "groups_negative": 2}


def test_baseline_itself_has_nan_delta(directions):
    ours = direction_outcomes(toy_ranking("fusion"), directions)
    for reference in (ours, ref_outcomes([True] * 5, name="fusion")):
        row = summarize(ours, directions, baseline=reference)
        assert math.isnan(row["delta_pts"]) and math.isnan(row["delta_lo"])


def test_missing_designated_passage_names_the_qid(directions):
    frame = pd.DataFrame([k for k in KEYS if not (k[0] == "B_q2" and k[1] == "b1")],
                         columns=["qid", "pid", "k0", "k1", "k2"])
    with pytest.raises(ValueError, match=r"B_q2 \(counterpart b1\)"):
        direction_outcomes(rank_by_keys(frame, "holey"), directions)


def test_outcomes_must_be_exactly_q_c(directions):
    ours = direction_outcomes(toy_ranking(), directions)
    with pytest.raises(ValueError, match="miss 1 eligible"):
        summarize(ours[ours["qid"] != "A_q1"], directions)
    with pytest.raises(ValueError, match="different Q_c"):
        summarize(ours, directions, baseline=ref_outcomes([True] * 5).iloc[:4])
    with pytest.raises(ValueError, match="ranker name"):
        summarize(pd.DataFrame(ours.to_dict("list")), directions)


def test_empty_population_gives_nan_rates():
    d = annotate_population(toy_directions().iloc[6:], pd.DataFrame({"qid": ["D_q1"], "pid": ["d1"]}))
    frame = pd.DataFrame([k for k in KEYS if k[0].startswith("D")], columns=["qid", "pid", "k0", "k1", "k2"])
    o = direction_outcomes(rank_by_keys(frame, "none"), d)
    row = summarize(o, d)
    assert row["n"] == 0 and row["strict"] == 0 and math.isnan(row["strict_pct"]) and math.isnan(row["mrr"])
    assert row["paired_n"] == 0 and math.isnan(row["paired_pct"])


def test_vectorized_outcomes_match_a_plain_loop():
    """Random keys with many exact ties: the vectorized comparison equals Python tuple comparison."""
    rng = np.random.default_rng(0)
    n_q, n_c = 40, 7
    qids = [f"Q{i}_q1" for i in range(n_q)]
    frame = pd.DataFrame({"qid": np.repeat(qids, n_c), "pid": np.tile([f"p{j}" for j in range(n_c)], n_q),
                          "k0": rng.integers(0, 2, n_q * n_c), "k1": rng.integers(0, 3, n_q * n_c),
                          "k2": rng.integers(0, 3, n_q * n_c) / 2})
    dirs = pd.DataFrame({"qid": qids, "pair_id": [q[:-3] for q in qids], "split": "test", "preferred_pid": "p1",
                         "counterpart_pid": "p4", "group": "g", "conflict": False})
    dirs = annotate_population(dirs, frame)
    o = direction_outcomes(rank_by_keys(frame, "rnd"), dirs)
    keyed = frame.set_index(["qid", "pid"])[["k0", "k1", "k2"]]
    expected = [tuple(keyed.loc[(q, "p1")]) > tuple(keyed.loc[(q, "p4")]) for q in qids]
    ties = [tuple(keyed.loc[(q, "p1")]) == tuple(keyed.loc[(q, "p4")]) for q in qids]
    assert o["strict"].tolist() == expected and o["tie"].tolist() == ties
    assert 0 < sum(ties) < n_q and 0 < sum(expected) < n_q


def test_every_table2_column_has_one_definition():
    pairs = [m for m in TABLE2 if isinstance(m, PairMeasure)]
    names = [m.name for m in (*DIRECTION_MEASURES, *pairs, *BASELINE_MEASURES, *INTERVAL_MEASURES)]
    assert len(names) == len(set(names))
    assert ["ranker", *sorted(names)] == ["ranker", *sorted(TABLE2_ROW_COLUMNS[1:])]
    assert TABLE2_ROW_COLUMNS == (*TABLE2_COLUMNS, *TABLE2_INTERVAL_COLUMNS)
    assert TABLE2_COLUMNS == (  # the output contract (docs/protocol.md#outputs), names and order
        "ranker", "n", "strict", "strict_pct", "paired", "paired_n", "paired_pct", "mrr", "pref_at_1", "pref_at_3",
        "pref_at_10", "mean_rank_pos", "mean_rank_neg", "both_top10", "ties", "fallback", "delta_pts", "delta_lo",
        "delta_hi", "ndcg_at_10")  # a new measure is appended: the columns before it keep their places
    assert TABLE2_INTERVAL_COLUMNS[:11] == (
        "strict_pct_lo", "strict_pct_hi", "mrr_lo", "mrr_hi", "paired_pct_lo", "paired_pct_hi",
        "delta_mrr", "delta_mrr_lo", "delta_mrr_hi", "mde_pts", "se_delta_pts")
    # Every interval bounds a rate or mean that exists, and every rate or mean of Table II has one.
    of = {m.of for m in INTERVAL_MEASURES}
    rates = {m.name for m in DIRECTION_MEASURES if m.aggregate != "count"} | {"paired_pct"}
    assert of == rates


def test_ndcg_at_10_by_hand(directions):
    """nDCG@10 with the preferred passage the one relevant passage (gain 1; ideal DCG = 1/log2(2) = 1), ranx style.

    Preferred ranks 1, 3, 11, 1, 3 (A_q1, A_q2, B_q1, B_q2 | C_q1): DCG@10 is 1/log2(2) = 1, 1/log2(4) = 1/2,
    0 (rank 11 is past the cut), 1, 1/2; the mean is 3/5. Intervals as in test_intervals_by_hand: g2 alone
    gives 1/2, g1 alone (1 + 1/2 + 0 + 1) / 4 = 5/8.
    """
    row = summarize(direction_outcomes(toy_ranking(), directions), directions)
    assert row["ndcg_at_10"] == pytest.approx(3 / 5, rel=1e-12)
    assert (row["ndcg_at_10_lo"], row["ndcg_at_10_hi"]) == (pytest.approx(1 / 2), pytest.approx(5 / 8))
    # A single direction at rank 10 still counts (1/log2(11)); at rank 2 it is 1/log2(3) = 0.6309.
    ndcg = paired_measure("ndcg_at_10")
    ranks = np.array([1.0, 2.0, 10.0, 11.0, 100.0])
    assert ndcg.values({"rank_pos": ranks}).tolist() == pytest.approx([1.0, 1 / math.log2(3), 1 / math.log2(11), 0, 0])
    assert (ndcg.unit, ndcg.scale, ndcg.position) == ("nDCG", 1.0, True)


def test_summarize_refuses_a_measure_without_a_column_and_a_column_without_a_measure(directions, monkeypatch):
    outcomes = direction_outcomes(toy_ranking(), directions)
    monkeypatch.setattr(measures, "TABLE2_ROW_COLUMNS", (*TABLE2_ROW_COLUMNS, "unmeasured"))
    with pytest.raises(ValueError, match=r"without a value \['unmeasured'\]"):
        summarize(outcomes, directions, n_resamples=10)
    monkeypatch.setattr(measures, "TABLE2_ROW_COLUMNS", tuple(c for c in TABLE2_ROW_COLUMNS if c != "ndcg_at_10"))
    with pytest.raises(ValueError, match=r"without a Table II column \['ndcg_at_10'\]"):
        summarize(outcomes, directions, n_resamples=10)


def test_intervals_by_hand(directions):
    """Two groups: g1 = A_q1, A_q2, B_q1, B_q2 and g2 = C_q1. A resample is (g1,g1), (g1,g2) or (g2,g2) with
    probability 1/4, 1/2, 1/4, so with 2,000 draws the 2.5th percentile is the (g2,g2) value and the 97.5th the (g1,g1)
    value (whichever is smaller / larger); paired_pct's complete pairs A and B both sit in g1."""
    row = summarize(direction_outcomes(toy_ranking(), directions), directions)
    expected = {
        "strict_pct": (0.0, 75.0),  # g2: 0/1, g1: 3/4
        "mrr": (1 / 3, (1 + 1 / 3 + 1 / 11 + 1) / 4),
        "pref_at_1": (0.0, 50.0), "pref_at_3": (75.0, 100.0), "pref_at_10": (75.0, 100.0),
        "mean_rank_pos": (3.0, 16 / 4), "mean_rank_neg": (2.0, 18 / 4),
        "paired_pct": (50.0, 50.0),
    }
    for column, (lo, hi) in expected.items():
        assert (row[f"{column}_lo"], row[f"{column}_hi"]) == (pytest.approx(lo), pytest.approx(hi)), column


def test_reference_intervals_se_and_mde_by_hand(directions):
    ours = direction_outcomes(toy_ranking(), directions)
    row = summarize(ours, directions, baseline=ref_outcomes([False, True, False, False, False]))
    # Δ strict per direction (1, -1, 1, 1 | 0): (g1,g1) 4/8, (g1,g2) 2/5, (g2,g2) 0/2.
    assert (row["delta_pts"], row["delta_lo"], row["delta_hi"]) == (pytest.approx(40.0), 0.0, 50.0)
    # Resampled Δ is 0.5, 0.4, 0 with probability 1/4, 1/2, 1/4: SD = sqrt(0.1425 - 0.325²) = 0.19203.
    assert row["se_delta_pts"] == pytest.approx(19.203, abs=1.0)
    # MDE from the group-level null spread: group sums of Δ strict are g1 +2, g2 0 -> sqrt(2²) / 5 directions.
    z = norm.ppf(0.975) + norm.ppf(0.80)
    assert row["mde_pts"] == pytest.approx(100 * z * 2 / 5, rel=1e-12)
    # Δ reciprocal rank vs a reference at rank 1 everywhere: (0, -2/3, -10/11, 0 | -2/3).
    g1 = -(2 / 3 + 10 / 11)
    assert row["delta_mrr"] == pytest.approx((g1 - 2 / 3) / 5)
    assert (row["delta_mrr_lo"], row["delta_mrr_hi"]) == (pytest.approx(-2 / 3), pytest.approx(g1 / 4))
    # Resampled Δ MRR is g1/4, (g1 - 2/3)/5, -2/3 with probability 1/4, 1/2, 1/4.
    values, weights = np.array([g1 / 4, (g1 - 2 / 3) / 5, -2 / 3]), np.array([0.25, 0.5, 0.25])
    sd = math.sqrt(weights @ values ** 2 - (weights @ values) ** 2)
    assert row["se_delta_mrr"] == pytest.approx(sd, rel=0.06)
    assert row["mde_mrr"] == pytest.approx(z * math.sqrt(g1 ** 2 + (2 / 3) ** 2) / 5, rel=1e-12)


def test_delta_interval_is_the_group_bootstrap_of_the_difference(directions):
    """summarize's Δ strict comes from the same draws as a group bootstrap of the differences: identical."""
    rng = np.random.default_rng(4)
    d = directions.copy()
    d["group"] = ["g1", "g1", "g2", "g2", "g3", "g3", "g4", "g4"]
    ours = direction_outcomes(toy_ranking(), d)
    for _ in range(5):
        ref = ref_outcomes(list(rng.random(5) < 0.5))
        row = summarize(ours, d, baseline=ref, seed=9)
        diff = ours["strict"].to_numpy(float) - ref["strict"].to_numpy(float)
        ci = group_bootstrap({"d": diff, "n": np.ones(len(diff))}, d.set_index("qid").loc[ours["qid"], "group"].to_numpy(),
                             {"delta": Ratio("d", "n")}, seed=9)["delta"]
        assert (row["delta_pts"], row["delta_lo"], row["delta_hi"]) == (100 * ci.point, 100 * ci.lo, 100 * ci.hi)
        assert row["se_delta_pts"] == 100 * ci.se


def pair_only_directions() -> pd.DataFrame:
    """Complete pairs P1, P2 (group g1) and P3 (g2); Q1 has one eligible direction (g3, no complete pair)."""
    rows = [(f"{p}_q{k}", p, k, "test", f"{p}a" if k == 1 else f"{p}b", f"{p}b" if k == 1 else f"{p}a", g, False)
            for p, g in (("P1", "g1"), ("P2", "g1"), ("P3", "g2"), ("Q1", "g3")) for k in (1, 2)]
    d = pd.DataFrame(rows, columns=["qid", "pair_id", "direction", "split", "preferred_pid", "counterpart_pid",
                                    "group", "conflict"])
    d.loc[d["qid"] == "Q1_q2", "conflict"] = True
    d["conflict"] = d["conflict"].astype(bool)
    pool = pd.DataFrame({"qid": np.repeat(d["qid"], 2), "pid": np.ravel(d[["preferred_pid", "counterpart_pid"]])})
    return annotate_population(d, pool)


def pair_only_outcomes(strict: list[bool], name: str) -> pd.DataFrame:
    """Outcomes as a pair-only ranker leaves them in directions.csv: no full-pool ranks (Int64 NA)."""
    o = pd.DataFrame({"qid": ["P1_q1", "P1_q2", "P2_q1", "P2_q2", "P3_q1", "P3_q2", "Q1_q1"],
                      "rank_pos": pd.array([pd.NA] * 7, dtype="Int64"), "rank_neg": pd.array([pd.NA] * 7, dtype="Int64"),
                      "strict": pd.array(strict, dtype="boolean"), "tie": False, "fallback": False})
    o.attrs["ranker"] = name
    return o


def test_ranker_without_ranks_gets_nan_positions_and_pair_intervals():
    d = pair_only_directions()
    ours = pair_only_outcomes([True, True, True, False, True, True, False], "pair_only")
    ref = pair_only_outcomes([True, False, False, False, True, True, True], "ref")
    row = summarize(ours, d, baseline=ref)
    assert (row["n"], row["strict"], row["ties"], row["paired"], row["paired_n"]) == (7, 5, 0, 2, 3)
    assert row["strict_pct"] == pytest.approx(500 / 7)
    for column in ("mrr", "pref_at_1", "pref_at_3", "pref_at_10", "mean_rank_pos", "mean_rank_neg", "both_top10",
                   "mrr_lo", "mrr_hi", "pref_at_1_lo", "mean_rank_neg_hi", "delta_mrr", "delta_mrr_lo", "delta_mrr_hi",
                   "se_delta_mrr", "mde_mrr", "ndcg_at_10", "ndcg_at_10_lo", "ndcg_at_10_hi"):
        assert math.isnan(row[column]), column
    # Pairs resample with their groups only (g1: P1 both, P2 not; g2: P3 both; g3 holds no complete pair):
    # (g1,g1) 2/4, (g1,g2) 2/3, (g2,g2) 2/2.
    assert row["paired_pct"] == pytest.approx(200 / 3)
    assert (row["paired_pct_lo"], row["paired_pct_hi"]) == (50.0, 100.0)
    # Δ strict (0, 1, 1, 0 | 0, 0 | -1) over three groups: computed, with an interval around +1/7.
    assert row["delta_pts"] == pytest.approx(100 / 7)
    assert row["delta_lo"] <= row["delta_pts"] <= row["delta_hi"] and row["mde_pts"] > 0


def test_partly_missing_ranks_are_an_error():
    d = pair_only_directions()
    ours = pair_only_outcomes([True] * 7, "half")
    ours["rank_pos"] = pd.array([1, 2, 3, 4, 5, 6, pd.NA], dtype="Int64")
    ours["rank_neg"] = pd.array([2, 3, 4, 5, 6, 7, 8], dtype="Int64")
    with pytest.raises(ValueError, match=r"ranks are missing for 1 of 7 directions, e.g. qid \['Q1_q1'\]"):
        summarize(ours, d)


def test_pair_split_across_groups_is_an_error():
    d = pair_only_directions()
    d.loc[d["qid"] == "P1_q2", "group"] = "g9"
    with pytest.raises(ValueError, match=r"pair \('test', 'P1'\) spans 2 source groups"):
        summarize(pair_only_outcomes([True] * 7, "x"), d)


def test_paired_measures_are_looked_up_by_name_or_by_the_column_they_decide():
    assert paired_measure("strict") is paired_measure("strict_pct") is PAIRED_MEASURES[0]
    strict, mrr = paired_measure("strict"), paired_measure("mrr")
    assert (strict.scale, strict.unit, mrr.scale, mrr.unit, mrr.position) == (100.0, "pts", 1.0, "MRR", True)
    # +2.5 points over 400 directions is 10 directions of the count column, 2.5 of the percentage.
    assert strict.in_column("strict", 2.5, 400) == pytest.approx(10.0) and strict.in_column("strict_pct", 2.5, 400) == 2.5
    with pytest.raises(KeyError, match="does not decide"):
        strict.in_column("mrr", 1.0, 10)
    with pytest.raises(KeyError, match="no paired measure named 'paired_pct'"):
        paired_measure("paired_pct")


def test_seed_average_is_the_share_of_seeds_and_the_mean_reciprocal_rank() -> None:
    """Two directions, three seeds, by hand: strict 2/3 and 0/3; 1/rank means (1 + 1/2 + 1/4)/3 and 1/3."""
    from reports.outcomes import seed_average

    seeds = [pd.DataFrame({"qid": ["a", "b"], "rank_pos": [1, 3], "rank_neg": [2, 1], "strict": [True, False],
                           "tie": [False, False], "fallback": [False, False]}),
             pd.DataFrame({"qid": ["b", "a"], "rank_pos": [3, 2], "rank_neg": [1, 1], "strict": [False, False],
                           "tie": [True, True], "fallback": [False, False]}),
             pd.DataFrame({"qid": ["a", "b"], "rank_pos": [4, 3], "rank_neg": [5, 2], "strict": [True, False],
                           "tie": [False, False], "fallback": [False, False]})]
    out = seed_average(seeds).set_index("qid")
    assert out.loc["a", "strict"] == pytest.approx(2 / 3) and out.loc["b", "strict"] == 0.0
    assert out.loc["a", "tie"] == pytest.approx(1 / 3) and out.loc["b", "tie"] == pytest.approx(1 / 3)
    assert 1 / out.loc["a", "rank_pos"] == pytest.approx((1 + 1 / 2 + 1 / 4) / 3)
    assert 1 / out.loc["b", "rank_pos"] == pytest.approx(1 / 3)
    mrr = np.mean(1 / seed_average(seeds)["rank_pos"])
    assert mrr == pytest.approx(np.mean([np.mean(1 / s["rank_pos"]) for s in seeds]))
    with pytest.raises(ValueError, match="other directions"):
        seed_average([seeds[0], seeds[0].iloc[:1]])
