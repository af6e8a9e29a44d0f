"""Group sign-flip tests (both sides), Holm, power, paired differences and TOST: by hand and against scipy."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm, permutation_test
from scipy.stats import t as student_t

from reports.bootstrap import Ratio, group_bootstrap
from reports.group_tests import (BETS, MIN_DIFFERING, bounded_mean_p, mean_test, sign_flip_test, skew_corrected_p,
                                 smallest_p)
from reports.stats import (certifiable_margin, directions_needed, equivalence, group_effect, holm,
                           minimum_detectable_effect, paired_difference, z_sum)

Z = norm.ppf(0.975) + norm.ppf(0.80)


def scipy_p(d, alternative: str = "two-sided") -> float:
    """Exact sign-flip p-value of the sum, by scipy (every sign vector when n_resamples is inf)."""
    result = permutation_test((np.asarray(d, dtype=float),), lambda x, axis: np.sum(x, axis=axis),
                              permutation_type="samples", n_resamples=np.inf, vectorized=True,
                              alternative=alternative)
    return float(result.pvalue)


def test_sign_flip_by_hand():
    # (3, 1, 1): the 8 sign vectors sum to 5, 3, 3, 1, -1, -3, -3, -5.
    t = sign_flip_test(np.array([3.0, 1.0, 1.0]))
    assert (t.statistic, t.n_groups, t.exact, t.n_permutations) == (5.0, 3, True, 8)
    assert (t.p_greater, t.p_less, t.p_two_sided) == (1 / 8, 1.0, 2 / 8)
    # (2, -1, 0): the zero group cannot change the sum; sums 1, 3, -3, -1 over the two that differ.
    t = sign_flip_test(np.array([2.0, -1.0, 0.0]))
    assert (t.p_greater, t.p_less, t.p_two_sided, t.n_groups) == (0.5, 0.75, 1.0, 2)
    # No group differs: nothing to test.
    t = sign_flip_test(np.zeros(5))
    assert (t.p_greater, t.p_less, t.p_two_sided, t.n_groups) == (1.0, 1.0, 1.0, 0)


@pytest.mark.parametrize("seed", range(6))
def test_sign_flip_equals_scipy_exact_on_both_sides(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(3, 12))
    d = rng.integers(-3, 4, m).astype(float) if seed % 2 else rng.normal(0.3, 1.0, m)  # integer and real differences
    t = sign_flip_test(d)
    assert t.p_two_sided == pytest.approx(scipy_p(d), rel=1e-12)
    assert t.p_greater == pytest.approx(scipy_p(d, "greater"), rel=1e-12)
    assert t.p_less == pytest.approx(scipy_p(d, "less"), rel=1e-12)


def test_monte_carlo_agrees_with_enumeration_and_is_seeded():
    rng = np.random.default_rng(3)
    d = rng.integers(-2, 4, 15).astype(float)
    exact = sign_flip_test(d)
    mc = sign_flip_test(d, exact_limit=1, seed=4)
    assert exact.exact and not mc.exact and mc.n_permutations == 10_000
    for side in ("p_greater", "p_less", "p_two_sided"):
        p = getattr(exact, side)
        assert getattr(mc, side) == pytest.approx(p, abs=4 * math.sqrt(p * (1 - p) / 10_000) + 2e-4), side
    assert sign_flip_test(d, exact_limit=1, seed=4) == mc
    assert sign_flip_test(d, exact_limit=1, seed=5).p_greater != mc.p_greater
    # 40 groups all +5: only 1 of 2^40 sign vectors reaches 200; the Monte Carlo p-value is 1/(R+1), never 0.
    t = sign_flip_test(np.full(40, 5.0))
    assert (t.p_greater, t.p_two_sided, t.p_less) == (1 / 10_001, 1 / 10_001, 1.0)


def test_smallest_attainable_p_depends_on_the_number_of_groups_alone():
    assert [smallest_p(g) for g in (0, 1, 4, 5, 6)] == [1.0, 0.5, 1 / 16, 1 / 32, 1 / 64]
    assert smallest_p(17) == 1 / 10_001  # beyond 2^16 sign vectors: Monte Carlo's floor
    # 4 groups, all improved: the one-sided p-value is exactly the smallest attainable, 1/16 > 0.05.
    assert sign_flip_test(np.array([2.0, 2.0, 2.0, 2.0])).p_greater == smallest_p(4) == 0.0625


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


def test_mde_and_directions_needed_by_hand():
    assert z_sum(0.025) == pytest.approx(Z, rel=1e-12)
    assert minimum_detectable_effect(1.0) == pytest.approx(Z, rel=1e-12)  # default: one-sided α/2 = 0.025
    assert minimum_detectable_effect(0.5, level=0.05, power=0.9) == pytest.approx(0.5 * (norm.ppf(0.95) + norm.ppf(0.9)))
    assert math.isnan(minimum_detectable_effect(0.0)) and math.isnan(minimum_detectable_effect(float("nan")))
    # MDE 4 points at 150 directions, observed +2: (4/2)² × 150 = 600 directions.
    assert directions_needed(150, 4.0, 2.0) == 600 and directions_needed(150, 4.0, -2.0) == 600
    assert directions_needed(150, 3.0, 4.0) == math.ceil(150 * 9 / 16)
    assert math.isnan(directions_needed(150, 4.0, 0.0)) and math.isnan(directions_needed(150, float("nan"), 1.0))
    with pytest.raises(ValueError):
        z_sum(0.0)


def test_group_effect_sums_by_group_and_its_null_sd_is_that_of_the_sign_flip_distribution():
    # Per direction 1, 1, -1, 1, 0 in groups a, a, b, c, c: D = (2, -1, 1), effect = scale × 2.
    e = group_effect(np.array([1.0, 1.0, -1.0, 1.0, 0.0]), np.array(["a", "a", "b", "c", "c"]), 10.0)
    assert (e.effect, e.n, e.n_groups) == (20.0, 5, 3)
    assert e.null_sd == pytest.approx(10.0 * math.sqrt(4 + 1 + 1))
    # The sign-flip distribution of Σ ε_g D_g: mean 0, variance Σ D_g² = 6 (checked over all 8 vectors).
    signs = ((np.arange(8)[:, None] >> np.arange(3)) & 1) * 2 - 1
    sums = signs @ np.array([2.0, -1.0, 1.0])
    assert sums.mean() == 0 and sums.var() == pytest.approx(6.0)
    flip = e.test.sign_flip
    assert (flip.p_greater, flip.p_less) == (pytest.approx(scipy_p([2, -1, 1], "greater")),
                                             pytest.approx(scipy_p([2, -1, 1], "less")))
    assert e.differing == e.test.differing == 3 and e.test.guarded
    with pytest.raises(ValueError, match="aligned"):
        group_effect(np.ones(3), np.array(["a", "b"]), 1.0)
    with pytest.raises(ValueError, match="exceeds its bound"):
        group_effect(np.array([2.0, 0.0]), np.array(["a", "b"]), 1.0)


def test_paired_difference_by_hand_and_against_the_bootstrap():
    a = np.array([1, 1, 1, 0, 0, 1], dtype=float)
    b = np.array([0, 0, 0, 0, 1, 1], dtype=float)
    groups = np.array(["g1", "g1", "g2", "g2", "g3", "g4"])
    d = paired_difference(a, b, groups, scale=100.0)
    # Group sums of a - b: g1 2, g2 1, g3 -1, g4 0.
    assert d.effect == pytest.approx(100 * 2 / 6) and (d.n, d.n_groups, d.differing_groups, d.discordant) == (6, 4, 3, 4)
    assert d.null_sd == pytest.approx(100 * math.sqrt(4 + 1 + 1) / 6)
    assert d.mde == pytest.approx(Z * d.null_sd)
    assert d.test.sign_flip.p_two_sided == 0.75 == pytest.approx(scipy_p([2, 1, -1]))
    assert d.test.sign_flip.p_greater == pytest.approx(scipy_p([2, 1, -1], "greater"))
    assert d.test.p_greater >= d.test.sign_flip.p_greater and d.test.p_two_sided >= 0.75
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        paired_difference(2 * a, b, groups)
    boot = group_bootstrap({"d": a - b, "n": np.ones(6)}, groups, {"x": Ratio("d", "n")})["x"]
    assert (d.lo, d.hi, d.se) == (100 * boot.lo, 100 * boot.hi, 100 * boot.se)
    with pytest.raises(ValueError, match="aligned"):
        paired_difference(a, b[:5], groups)


def test_equivalence_by_hand():
    groups = np.array(["g1", "g1", "g2", "g2", "g3", "g3"])
    same = np.array([1, 0, 1, 1, 0, 1], dtype=float)
    # Identical outcomes, margin 10 points: shifted group sums are all +0.2 (lower) and -0.2 (upper), each group
    # bounded by 2 × 1.1: the decision test of those sums (sign flips give 1/8; three groups: guarded).
    e = equivalence(same, same, groups, margin=10.0, scale=100.0)
    expected = mean_test(np.array([0.2, 0.2, 0.2]), 2.2)
    assert (e.p_above_lower, e.p_below_upper) == (expected.p_greater, mean_test(-np.full(3, 0.2), 2.2).p_less)
    assert expected.sign_flip.p_greater == 1 / 8 and e.p == max(e.p_above_lower, e.p_below_upper) >= 1 / 8
    # One direction better in g1: D = (1, 0, 0); the lower test flips (1.2, .2, .2), the upper (.8, -.2, -.2).
    better = same.copy()
    better[1] = 1.0
    e = equivalence(better, same, groups, margin=10.0, scale=100.0)
    assert e.p_above_lower == mean_test(np.array([1.2, 0.2, 0.2]), 2.2).p_greater >= scipy_p([1.2, 0.2, 0.2], "greater")
    assert e.p_below_upper == mean_test(np.array([0.8, -0.2, -0.2]), 2.2).p_less >= scipy_p([0.8, -0.2, -0.2], "less")
    with pytest.raises(ValueError, match="margin"):
        equivalence(same, same, groups, margin=0.0)


def test_the_decision_test_is_the_largest_of_its_parts():
    rng = np.random.default_rng(3)
    many = rng.normal(0.3, 1.0, 200)
    t = mean_test(many, bound=5.0)
    hall = skew_corrected_p(many)
    assert not t.guarded and t.differing == t.n_groups == 200
    assert t.p_greater == max(t.sign_flip.p_greater, hall[0]) and t.p_less == max(t.sign_flip.p_less, hall[1])
    few = np.concatenate([np.ones(15), np.zeros(300)])
    g = mean_test(few, bound=4.0)
    assert g.guarded and g.differing == 15 < MIN_DIFFERING and g.n_groups == 315
    assert g.p_greater == max(g.sign_flip.p_greater, skew_corrected_p(few)[0], bounded_mean_p(few, 4.0)[0])
    # 15 single-direction gains in groups that could each lose 4: the sign flips alone say 2^-15; a rare
    # whole-group loss could balance them, and the bound-aware test says so.
    assert g.sign_flip.p_greater < 1e-3 < 0.025 < g.p_greater
    assert mean_test(np.zeros(5), 1.0).p_two_sided == 1.0


def test_bounded_mean_p_by_hand():
    # Two gains of a whole bound: E = mean over bets of (1 + λ)², p = 1 / E; the other side (1 − λ)².
    greater, less = bounded_mean_p(np.array([2.0, 2.0, 0.0]), 2.0)
    assert greater == pytest.approx(1 / np.mean((1 + BETS) ** 2)) and less == 1.0
    with pytest.raises(ValueError, match="exceed"):
        bounded_mean_p(np.array([3.0]), 2.0)


@pytest.mark.parametrize("u", [[1.0, 1.0, 1.0, -3.0, 2.0, 0.0], [1.0, 0.0, 1.0, 1.0, -1.0, 2.0, 0.0, 1.0, -2.0, 1.0]])
def test_skew_corrected_p_by_hand(u):
    """Hall's transform of t, read against Student's t on G* − 1 degrees of freedom (at least 1), G* the groups
    the variance rests on: (Σ c²)² / Σ c⁴."""
    u = np.array(u)
    g, mean = len(u), u.mean()
    sd, skew = u.std(ddof=1), ((u - mean) ** 3).mean() / u.std() ** 3
    t = math.sqrt(g) * mean / sd
    a = skew / (3 * math.sqrt(g))
    z = t + a * t ** 2 + a ** 2 * t ** 3 / 3 + skew / (6 * math.sqrt(g))
    df = max(1.0, ((u - mean) ** 2).sum() ** 2 / ((u - mean) ** 4).sum() - 1)
    assert df < g - 1
    assert skew_corrected_p(u) == (pytest.approx(student_t.sf(z, df)), pytest.approx(student_t.cdf(z, df)))
    assert skew_corrected_p(np.full(4, 2.0)) == (0.0, 1.0)


def test_certifiable_margin_is_what_the_tost_certifies():
    groups = np.repeat(np.arange(38), 4)
    floor = certifiable_margin(groups, 0.0, 100.0)
    same = np.zeros(len(groups))
    assert equivalence(same, same, groups, floor * 1.02, 100.0).p <= 0.05 < equivalence(same, same, groups,
                                                                                        floor * 0.97, 100.0).p
    spread = certifiable_margin(groups, 10.0, 100.0)
    assert spread == pytest.approx((norm.ppf(0.95) + norm.ppf(0.90)) * 10.0)
    # 699 groups: the design allows far smaller margins than 38 groups.
    assert certifiable_margin(np.repeat(np.arange(699), 4), 0.0, 100.0) < 0.01 * floor
