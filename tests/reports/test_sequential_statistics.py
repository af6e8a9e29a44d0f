"""Sequential samples' statistics, proved by simulation (docs/statistics.md#sequential-samples).

NevIR-shaped grouped data: the real Test source groups (one to a few pairs, two directions a pair) drawn in a
random order without replacement, as a sequential sample draws them; pair directions negatively correlated
(query-blind pairs: one direction gains what the other loses); nulls that are skewed and not exchangeable
(a group's contribution is not symmetric about 0, and its law depends on the group's size). Every run looks
after every batch and stops as soon as Holm over the family decides every claim, or at its budget:

- the family-wise false-claim rate is at most α within three simulation SEs;
- a fixed-sample test read after every batch, stopping at its first rejection, exceeds α (why this exists);
- the directions a verdict takes at 0.5× and 1× the fixed design's MDE (the decision test's) and at the largest
  effect the outcome model allows, against that design's power.

The figures print in the test log and are quoted in docs/statistics.md#sequential-samples.
"""
from __future__ import annotations

import numpy as np
import pytest

from fixtures.data import load_split
from fixtures.groups import PREFIX_RULES, source_groups
from reports.sequential import (anytime_p, direction_differences, holm_decided, holm_last_axis, plan,
                                sequential_test, simulate_sequential)
from reports.group_tests import sign_flip_test
from reports.stats import ALPHA, holm

BATCH = 4  # source groups per look
FIXED = 150  # the fixed design compared with: the CPU grader's designated-pair sample
BUDGET = 2 * FIXED  # a sequential sample's max_directions


@pytest.fixture(scope="module")
def test_sizes() -> np.ndarray:
    """Directions per source group of NevIR Test (two per pair)."""
    groups = source_groups(load_split("test").pairs, PREFIX_RULES)
    return 2 * np.unique(list(groups.values()), return_counts=True)[1]


def _drawn(rng: np.random.Generator, sizes: np.ndarray, runs: int) -> np.ndarray:
    """Each run's group sizes in its own random order (without replacement)."""
    return sizes[np.argsort(rng.random((runs, len(sizes))), axis=1)]


def _groups_within(drawn: np.ndarray, directions: int) -> int:
    return int(max(1, (np.cumsum(drawn, axis=1) <= directions).sum(axis=1).min()))


def _skewed_null(rng: np.random.Generator, drawn: np.ndarray, claims: int) -> np.ndarray:
    """(runs, claims, groups) group sums with mean 0 given the group's size, skewed, and correlated across claims.

    Small groups (one pair) gain rarely and lose a little often (P(+0.9 n) = 0.1, else −0.1 n); larger groups the
    mirror image; each claim shares the group's draw with probability 0.7 (claims on one sample are correlated).
    """
    runs, groups = drawn.shape
    shared = rng.random((runs, 1, groups))
    own = rng.random((runs, claims, groups))
    u = np.where(rng.random((runs, claims, groups)) < 0.7, shared, own)
    small = (drawn <= 2)[:, None, :]
    per_direction = np.where(small, np.where(u < 0.1, 0.9, -0.1), np.where(u < 0.1, -0.9, 0.1))
    return per_direction * drawn[:, None, :]


def _rate(x: np.ndarray) -> tuple[float, float]:
    return float(x.mean()), float(np.sqrt(x.mean() * (1 - x.mean()) / len(x)))


def test_bounded_test_and_holm_helpers_agree_with_the_suite() -> None:
    rng = np.random.default_rng(0)
    p = rng.random((50, 5))
    np.testing.assert_allclose(holm_last_axis(p, 8), [holm([*row, 1, 1, 1])[:5] for row in p])
    assert holm_decided([0.001, 0.5], [0.9, 0.9], 4).tolist() == [True, False]
    with pytest.raises(ValueError, match="bound"):
        sequential_test([5.0], [3], bound=2)
    # A large effect decides; its confidence sequence holds the estimate and excludes 0.
    d, n = np.full(30, 2.0), np.full(30, 2)
    t = sequential_test(d * 0.8, n, bound=2, scale=100)
    assert t.p_greater[-1] < 0.01 and t.p_less[-1] == 1.0 and 0 < t.lo < 80 <= t.hi
    assert (np.diff(t.p_greater) <= 0).all()  # a running max: p only falls


def test_family_false_claim_rate_is_at_most_alpha_when_peeking_after_every_batch(test_sizes) -> None:
    rng = np.random.default_rng(29)
    runs, claims = 2000, 3  # an H2-like family on one sample: three claims, six hypotheses
    drawn = _drawn(rng, test_sizes, runs)
    max_groups = _groups_within(drawn, BUDGET)
    x = _skewed_null(rng, drawn, claims) / test_sizes.max()
    out = simulate_sequential(x, drawn, BATCH, 2 * claims, max_groups)
    wrong, se = _rate((out["holds"] | out["fails"]).any(axis=1))
    print(f"\nskewed non-exchangeable null, {claims} claims, {runs} runs, look every {BATCH} groups up to "
          f"{BUDGET} directions: family-wise false claims {100 * wrong:.2f}% (SE {100 * se:.2f})")
    assert wrong <= ALPHA + 3 * se
    # Negatively correlated pair directions, no effect, one claim per family.
    d = direction_differences(rng, drawn, 0.0, 0.35)
    out = simulate_sequential((d / test_sizes.max())[:, None, :], drawn, BATCH, 2, max_groups)
    wrong, se = _rate(out["holds"][:, 0] | out["fails"][:, 0])
    print(f"query-blind pairs, no effect, 35% discordant: false claims {100 * wrong:.2f}% (SE {100 * se:.2f})")
    assert wrong <= ALPHA + 3 * se


def test_peeking_with_the_fixed_sample_test_inflates_the_error_rate(test_sizes) -> None:
    """The fixed design's group sign-flip test, read after every batch, with a stop at its first rejection."""
    rng = np.random.default_rng(7)
    runs = 300
    drawn = _drawn(rng, test_sizes, runs)
    max_groups = _groups_within(drawn, BUDGET)
    d = direction_differences(rng, drawn, 0.0, 0.35)[:, :max_groups]
    looks = range(BATCH, max_groups + 1, BATCH)
    peeked = np.array([any(min((t := sign_flip_test(row[:k], 1000, seed=k)).p_greater, t.p_less) <= ALPHA / 2
                           for k in looks) for row in d])
    once = np.array([min((t := sign_flip_test(row, 1000)).p_greater, t.p_less) <= ALPHA / 2 for row in d])
    betting = simulate_sequential((d / test_sizes.max())[:, None, :], drawn[:, :max_groups], BATCH, 2, max_groups)
    rate, se = _rate(peeked)
    print(f"\nno effect, {runs} runs, {len(looks)} looks: the fixed test read once rejects {100 * once.mean():.1f}%, "
          f"read after every batch {100 * rate:.1f}% (SE {100 * se:.1f}); the betting test "
          f"{100 * betting['decided'].mean():.1f}%")
    assert rate > ALPHA + 3 * se
    assert betting["decided"].mean() <= ALPHA + 3 * np.sqrt(ALPHA * (1 - ALPHA) / runs)


def test_directions_to_a_verdict_against_the_fixed_design(test_sizes) -> None:
    """At 0.5× and 1× the fixed 150-direction design's MDE (the decision test's, a one-claim family: level α/2 per
    side) and at the largest effect the outcome model allows (45% discordant, 30% query-blind pairs: 31.5 pts)."""
    runs, discordant, blind = 1000, 0.45, 0.3
    top = 100 * discordant * (1 - blind)
    mde = plan(test_sizes, top, BATCH, BUDGET, FIXED, hypotheses=2, discordant=discordant, blind=blind,
               runs=runs).fixed_mde
    lines, plans = [], {}
    for factor, effect in ((0.5, 0.5 * mde), (1.0, mde), (top / mde, top)):
        p = plan(test_sizes, effect, BATCH, BUDGET, FIXED, hypotheses=2, discordant=discordant, blind=blind,
                 runs=runs, seed=int(10 * factor))
        plans[factor] = p
        lines.append(f"{factor:.2g}x MDE ({effect:.2f} pts): {p.line()}")
    print(f"\nfixed design: {FIXED} directions, MDE {mde:.2f} pts (decision test)\n" + "\n".join(lines))
    assert abs(plans[1.0].fixed_power - 0.80) < 0.06  # the simulated MDE is the design's, on other draws too
    strongest = plans[top / mde]
    assert strongest.fixed_power > plans[1.0].fixed_power
    # A clear effect is decided before the fixed design's size; a small one is not decided more often.
    assert strongest.median_directions < FIXED and strongest.decided_share > 0.9
    assert plans[0.5].decided_share < strongest.decided_share
    assert np.all(anytime_p(np.zeros((1, 5))) == 1.0)


def test_the_confidence_sequence_covers_the_effect_where_the_sample_stopped(test_sizes) -> None:
    """Stopped by the data (a look every batch, a stop at the first verdict), the interval still covers Δ."""
    rng = np.random.default_rng(11)
    runs, effect = 300, 0.15
    drawn = _drawn(rng, test_sizes, runs)
    max_groups = _groups_within(drawn, BUDGET)
    d = direction_differences(rng, drawn, effect, 0.45, 0.3)[:, :max_groups]
    out = simulate_sequential((d / test_sizes.max())[:, None, :], drawn, BATCH, 2, max_groups)
    covered = []
    for row, sizes, k in zip(d, drawn, out["groups"]):
        t = sequential_test(row[:k], sizes[:k], float(test_sizes.max()), scale=100)
        covered.append(t.lo <= 100 * effect <= t.hi)
    rate, se = _rate(np.array(covered))
    print(f"\n+{100 * effect:g} pts, {runs} runs stopped at their first verdict (mean {out['directions'].mean():.0f} "
          f"directions): the 95% confidence sequence covers it in {100 * rate:.1f}%")
    assert rate >= 1 - ALPHA - 3 * se
