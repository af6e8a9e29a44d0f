"""Paired comparisons of rankers by named measure: one computation behind Table II's Δ, pairwise.csv and claims."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm, permutation_test

from fixtures.populations import annotate_population
from reports.comparisons import PAIRWISE_COLUMNS, compare, compare_on, pairwise_table
from reports.measures import summarize
from reports.group_tests import mean_test
from reports.stats import holm

Z = norm.ppf(0.975) + norm.ppf(0.80)


def scipy_p(d) -> float:
    result = permutation_test((np.asarray(d, dtype=float),), lambda x, axis: np.sum(x, axis=axis),
                              permutation_type="samples", n_resamples=np.inf, vectorized=True)
    return float(result.pvalue)


def study(groups: list[str]) -> pd.DataFrame:
    """One eligible direction per entry, in the named source group (pairs are irrelevant to comparisons)."""
    n = len(groups)
    d = pd.DataFrame({"qid": [f"P{i}_q1" for i in range(n)], "pair_id": [f"P{i}" for i in range(n)], "split": "test",
                      "preferred_pid": "a", "counterpart_pid": "b", "group": groups, "conflict": False})
    pool = pd.DataFrame({"qid": np.repeat(d["qid"], 2), "pid": np.tile(["a", "b"], n)})
    return annotate_population(d, pool)


def outcomes(directions: pd.DataFrame, strict, rank_pos=None, name: str = "r") -> pd.DataFrame:
    n = len(directions)
    ranks = pd.array(rank_pos if rank_pos is not None else [pd.NA] * n, dtype="Int64")
    o = pd.DataFrame({"qid": directions["qid"].to_numpy(), "rank_pos": ranks,
                      "rank_neg": ranks + 1 if rank_pos is not None else ranks,
                      "strict": np.asarray(strict, dtype=bool), "tie": False, "fallback": False})
    o.attrs["ranker"] = name
    return o


def test_compare_by_hand():
    # Group sums of a - b: g1 (1,1 vs 0,0) = 2, g2 (1,0 vs 0,0) = 1, g3 (0 vs 1) = -1, g4 (1 vs 1) = 0.
    d = study(["g1", "g1", "g2", "g2", "g3", "g4"])
    a = outcomes(d, [1, 1, 1, 0, 0, 1], rank_pos=[1, 1, 2, 4, 2, 1], name="a")
    b = outcomes(d, [0, 0, 0, 0, 1, 1], rank_pos=[2, 2, 2, 2, 1, 1], name="b")
    row = compare(a, b, d)
    assert list(row) == list(PAIRWISE_COLUMNS[:-2])
    assert (row["first"], row["second"], row["n"], row["n_groups"], row["discordant"]) == ("a", "b", 6, 4, 4)
    assert row["delta_pts"] == pytest.approx(100 * 2 / 6)
    # Sign vectors of (2, 1, -1): sums 2, 4, 0, 2, -2, 0, -4, -2; |sum| >= 2 in 6 of 8. The decision test (groups
    # of up to 2 directions; 3 differing groups, so guarded) can only say more.
    strict_test = mean_test(np.array([2.0, 1, -1, 0]), 2.0)
    assert strict_test.sign_flip.p_two_sided == 0.75 == pytest.approx(scipy_p([2, 1, -1, 0]))
    assert row["p_strict"] == strict_test.p_two_sided >= 0.75 and row["differing_groups"] == 3
    # Reciprocal-rank differences: g1 (1/2 + 1/2), g2 (0 - 1/4), g3 (1/2 - 1), g4 0.
    assert row["delta_mrr"] == pytest.approx((1.0 - 0.25 - 0.5) / 6)
    assert row["p_mrr"] == mean_test(np.array([1.0, -0.25, -0.5, 0.0]), 2.0).p_two_sided >= scipy_p([1.0, -0.25, -0.5])
    assert row["delta_lo"] <= row["delta_pts"] <= row["delta_hi"]
    # MDE from the group-level null spread: (z_.975 + z_.8) × sqrt(2² + 1² + 1²) / 6 × 100.
    assert row["mde_pts"] == pytest.approx(Z * 100 * math.sqrt(6) / 6, rel=1e-12)
    assert row["mde_mrr"] == pytest.approx(Z * math.sqrt(1.0 + 0.0625 + 0.25) / 6, rel=1e-12)
    flipped = compare(b, a, d)
    assert flipped["delta_pts"] == pytest.approx(-row["delta_pts"]) and flipped["p_strict"] == row["p_strict"]
    assert (flipped["delta_lo"], flipped["delta_hi"]) == (pytest.approx(-row["delta_hi"]), pytest.approx(-row["delta_lo"]))
    # The same numbers by measure name, one-sided on either side.
    strict = compare_on("strict", a, b, d)
    assert (strict.effect, strict.mde) == (row["delta_pts"], row["mde_pts"])
    flip = strict.test.sign_flip
    assert flip.p_greater == pytest.approx(3 / 8) and flip.p_less == pytest.approx(7 / 8)
    assert (strict.test.p_greater, strict.test.p_less) == (strict_test.p_greater, strict_test.p_less)


def realistic(seed: int = 0, n: int = 700, n_groups: int = 180) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    rng = np.random.default_rng(seed)
    d = study([f"G{g:03d}" for g in np.sort(rng.integers(0, n_groups, n))])
    base = rng.random(n) < 0.5
    runs = {}
    for name, flip, ranked in (("fusion", 0.0, True), ("better", 0.25, True), ("pair_only", 0.3, False)):
        strict = np.where(rng.random(n) < flip, rng.random(n) < (0.8 if name == "better" else 0.5), base)
        runs[name] = outcomes(d, strict, rng.integers(1, 50, n) if ranked else None, name)
    return d, runs


def test_compare_matches_summarize_delta_and_scipy():
    """Table II's Δ columns and pairwise.csv come from the same computation: identical, not merely close."""
    d, runs = realistic()
    row = compare(runs["better"], runs["fusion"], d)
    summary = summarize(runs["better"], d, baseline=runs["fusion"])
    for key in ("delta_pts", "delta_lo", "delta_hi", "se_delta_pts", "mde_pts", "delta_mrr", "delta_mrr_lo",
                "delta_mrr_hi", "se_delta_mrr", "mde_mrr"):
        assert row[key] == summary[key], key
    assert row["delta_pts"] > 0 and row["delta_lo"] > 0 and row["p_strict"] < 0.01
    # The Monte Carlo p-value of Δ MRR agrees with scipy's own Monte Carlo test on the same group sums.
    group_sums = (1 / runs["better"]["rank_pos"].to_numpy(float) - 1 / runs["fusion"]["rank_pos"].to_numpy(float))
    sums = pd.Series(group_sums).groupby(d["group"].to_numpy()).sum().to_numpy()
    ref = permutation_test((sums,), lambda x, axis: np.sum(x, axis=axis), permutation_type="samples",
                           n_resamples=20_000, vectorized=True, rng=1).pvalue
    assert row["p_mrr"] == pytest.approx(ref, abs=0.02)


def test_compare_without_ranks_and_on_different_directions():
    d, runs = realistic()
    row = compare(runs["pair_only"], runs["fusion"], d)
    assert all(math.isnan(row[k]) for k in ("delta_mrr", "delta_mrr_lo", "delta_mrr_hi", "se_delta_mrr", "mde_mrr", "p_mrr"))
    assert not math.isnan(row["p_strict"])
    assert compare_on("mrr", runs["pair_only"], runs["fusion"], d) is None
    with pytest.raises(ValueError, match="not evaluated on the same directions"):
        compare(runs["fusion"].iloc[:10], runs["better"], d)
    with pytest.raises(ValueError, match="ranker names"):
        compare(pd.DataFrame(runs["fusion"].to_dict("list")), runs["better"], d)
    with pytest.raises(KeyError, match="no paired measure named 'recall'"):
        compare_on("recall", runs["better"], runs["fusion"], d)


def test_pairwise_table_pairs_identical_direction_sets_and_adjusts_by_holm():
    d, runs = realistic()
    sample = runs["fusion"]["qid"].iloc[::50].tolist()  # 14 directions: a sampled ranker and its fusion baseline
    runs["fusion_sample"] = runs["fusion"][runs["fusion"]["qid"].isin(sample)].reset_index(drop=True)
    runs["grader"] = runs["better"][runs["better"]["qid"].isin(sample)].reset_index(drop=True)
    runs["grader"].attrs["ranker"] = "grader"
    table = pairwise_table(runs, d)
    assert list(table.columns) == list(PAIRWISE_COLUMNS)
    assert list(zip(table["first"], table["second"])) == [
        ("fusion", "better"), ("fusion", "pair_only"), ("better", "pair_only"), ("fusion_sample", "grader")]
    assert table["n"].tolist() == [700, 700, 700, 14]
    assert table["p_strict_holm"].to_numpy() == pytest.approx(holm(table["p_strict"].to_numpy()))
    # MRR family: only the two ranked pairs; pair_only rows stay NaN.
    mrr = table["p_mrr"].to_numpy()
    assert np.isnan(mrr[[1, 2]]).all() and np.isnan(table["p_mrr_holm"].to_numpy()[[1, 2]]).all()
    assert table["p_mrr_holm"].to_numpy()[[0, 3]] == pytest.approx(holm(mrr[[0, 3]]))
    # The sampled comparison is small; its MDE is large.
    assert table.iloc[3]["mde_pts"] > 3 * table.iloc[0]["mde_pts"]
