"""Paired comparisons: the group sign-flip test, Holm, MDE and the pairwise table, by hand and against scipy."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm, permutation_test

from fixtures.populations import annotate_population
from reports.bootstrap import group_bootstrap_delta
from reports.measures import summarize
from reports.bootstrap import planning_mde
from reports.stats import PAIRWISE_COLUMNS, compare, holm, pairwise_table, sign_flip_test

Z = norm.ppf(0.975) + norm.ppf(0.80)


def scipy_p(d: np.ndarray) -> float:
    """Exact two-sided sign-flip p-value of the sum, by scipy (every sign vector when n_resamples is inf)."""
    result = permutation_test((np.asarray(d, dtype=float),), lambda x, axis: np.sum(x, axis=axis),
                              permutation_type="samples", n_resamples=np.inf, vectorized=True)
    return float(result.pvalue)


def test_sign_flip_by_hand():
    # (3, 1, 1): sums over the 8 sign vectors are ±5, ±3, ±3, ±1; |sum| >= 5 in 2 of 8.
    t = sign_flip_test(np.array([3.0, 1.0, 1.0]))
    assert (t.statistic, t.p_value, t.n_groups, t.exact, t.n_permutations) == (5.0, 0.25, 3, True, 8)
    # (2, -1, 0): the zero group cannot change the sum; sums ±1, ±3, all >= |1|.
    assert sign_flip_test(np.array([2.0, -1.0, 0.0])).p_value == 1.0
    # No group differs: nothing to test.
    assert sign_flip_test(np.zeros(5)).p_value == 1.0


@pytest.mark.parametrize("seed", range(6))
def test_sign_flip_equals_scipy_exact(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(3, 12))
    d = rng.integers(-3, 4, m).astype(float) if seed % 2 else rng.normal(0.3, 1.0, m)  # integer and real differences
    assert sign_flip_test(d).p_value == pytest.approx(scipy_p(d), rel=1e-12)


def test_monte_carlo_agrees_with_enumeration_and_is_seeded():
    rng = np.random.default_rng(3)
    d = rng.integers(-2, 4, 15).astype(float)
    exact = sign_flip_test(d)
    mc = sign_flip_test(d, exact_limit=1, seed=4)
    assert exact.exact and not mc.exact and mc.n_permutations == 10_000
    assert mc.p_value == pytest.approx(exact.p_value, abs=4 * math.sqrt(exact.p_value * (1 - exact.p_value) / 10_000))
    assert sign_flip_test(d, exact_limit=1, seed=4) == mc
    assert sign_flip_test(d, exact_limit=1, seed=5).p_value != mc.p_value
    # 40 groups all +5: only 2 of 2^40 sign vectors reach |200|; the Monte Carlo p-value is 1/(R+1), never 0.
    assert sign_flip_test(np.full(40, 5.0)).p_value == 1 / 10_001


def test_holm_by_hand():
    # Sorted .005, .01, .03, .04 times 4, 3, 2, 1 = .02, .03, .06, .04 -> running max .02, .03, .06, .06.
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    adjusted = holm([0.5, np.nan, 0.4])  # NaN is not part of the family: m = 2
    assert adjusted[[0, 2]] == pytest.approx([0.8, 0.8]) and math.isnan(adjusted[1])
    assert holm([0.6, 0.7]).tolist() == [1.0, 1.0]  # capped
    assert holm([0.02, 0.02]).tolist() == [0.04, 0.04]
    assert holm([]).shape == (0,)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm([0.5, 1.5])


def test_planning_mde():
    # n = 100, discordance 0.2: SE = sqrt(0.002) = 0.044721; MDE = 2.801585 × SE = 0.125291.
    assert planning_mde(100, 0.2) == pytest.approx(0.125291, abs=1e-6)
    assert planning_mde(100, 0.2) == pytest.approx(Z * math.sqrt(0.2 / 100), rel=1e-12)
    assert planning_mde(100, 0.2, design_effect=2.0) == pytest.approx(Z * math.sqrt(0.4 / 100), rel=1e-12)
    assert planning_mde(16, 0.25) == pytest.approx(Z * 0.125)  # the grader's 16 directions: 35 points
    with pytest.raises(ValueError, match="discordance"):
        planning_mde(10, 1.5)


def test_planning_mde_matches_the_bootstrap_se_of_independent_directions():
    """Each direction its own group, discordance 0.2, no true effect: bootstrap SE ≈ sqrt(0.2 / n)."""
    rng = np.random.default_rng(12)
    n = 4000
    discordant = rng.random(n) < 0.2
    a = np.where(discordant, rng.random(n) < 0.5, True)
    b = np.where(discordant, ~a, True)
    ci = group_bootstrap_delta(a, b, np.arange(n))
    assert ci.se == pytest.approx(math.sqrt(0.2 / n), rel=0.1)
    assert Z * ci.se == pytest.approx(planning_mde(n, 0.2), rel=0.1)


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
    # Sign vectors of (2, 1, -1): sums 2, 4, 0, 2, -2, 0, -4, -2; |sum| >= 2 in 6 of 8.
    assert row["p_strict"] == 0.75 == pytest.approx(scipy_p([2, 1, -1, 0]))
    # Reciprocal-rank differences: g1 (1/2 + 1/2), g2 (0 - 1/4), g3 (1/2 - 1), g4 0.
    assert row["delta_mrr"] == pytest.approx((1.0 - 0.25 - 0.5) / 6)
    assert row["p_mrr"] == pytest.approx(scipy_p([1.0, -0.25, -0.5]))
    assert row["delta_lo"] <= row["delta_pts"] <= row["delta_hi"]
    # MDE: the larger of the bootstrap one and the analytic floor for 4 discordant of 6 directions.
    assert row["mde_pts"] == pytest.approx(max(Z * row["se_delta_pts"], 100 * planning_mde(6, 4 / 6)), rel=1e-12)
    flipped = compare(b, a, d)
    assert flipped["delta_pts"] == pytest.approx(-row["delta_pts"]) and flipped["p_strict"] == row["p_strict"]
    assert (flipped["delta_lo"], flipped["delta_hi"]) == (pytest.approx(-row["delta_hi"]), pytest.approx(-row["delta_lo"]))


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
    d, runs = realistic()
    row = compare(runs["better"], runs["fusion"], d)
    summary = summarize(runs["better"], d, reference=runs["fusion"])
    for key in ("delta_pts", "delta_lo", "delta_hi", "se_delta_pts", "mde_pts", "delta_mrr", "delta_mrr_lo", "delta_mrr_hi",
                "se_delta_mrr", "mde_mrr"):
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
    with pytest.raises(ValueError, match="not evaluated on the same directions"):
        compare(runs["fusion"].iloc[:10], runs["better"], d)
    with pytest.raises(ValueError, match="ranker names"):
        compare(pd.DataFrame(runs["fusion"].to_dict("list")), runs["better"], d)


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
    assert table["p_mrr_holm"].to_numpy()[[0, 3]] == pytest.approx(np.minimum(1, np.maximum.accumulate(
        np.sort(mrr[[0, 3]]) * [2, 1]))[np.argsort(np.argsort(mrr[[0, 3]]))])
    # The sampled comparison is small enough for exact enumeration; its interval is wide and its MDE large.
    small = table.iloc[3]
    assert small["mde_pts"] > 3 * table.iloc[0]["mde_pts"]
