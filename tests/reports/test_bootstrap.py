"""Source-group bootstrap of Δ strict: hand-enumerable cases, determinism, and an explicit-loop oracle."""
from __future__ import annotations

import numpy as np
import pytest

from reports.bootstrap import group_bootstrap_delta


def test_two_groups_enumerable_by_hand():
    # g1: 4 directions, Δ sum 2 (two corrections); g2: 1 direction, Δ 0.
    # Resamples of 2 groups: (g1,g1) -> 4/8 = .5; (g1,g2) -> 2/5 = .4; (g2,g2) -> 0/2 = 0 with probability 1/4,
    # so with 2,000 draws the 2.5th percentile is 0 and the 97.5th is 0.5.
    ours = np.array([1, 1, 1, 0, 0])
    ref = np.array([0, 0, 1, 0, 0])
    ci = group_bootstrap_delta(ours, ref, np.array(["g1", "g1", "g1", "g1", "g2"]), seed=7)
    assert ci.point == pytest.approx(0.4)
    assert (ci.lo, ci.hi) == (0.0, 0.5)
    assert (ci.n_groups, ci.n_resamples, ci.seed, ci.confidence) == (2, 2000, 7, 0.95)


def synthetic(seed: int = 1, n: int = 2766, groups: int = 700) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    g = np.sort(rng.integers(0, groups, n))
    ref = rng.random(n) < 0.52
    ours = np.where(rng.random(n) < 0.3, True, ref)
    return ours, ref, g


def test_deterministic_with_seed_and_contains_point():
    ours, ref, g = synthetic()
    a = group_bootstrap_delta(ours, ref, g, seed=13)
    b = group_bootstrap_delta(ours, ref, g, seed=13)
    c = group_bootstrap_delta(ours, ref, g, seed=14)
    assert a == b
    assert (a.lo, a.hi) != (c.lo, c.hi)
    assert a.lo < a.point < a.hi
    assert a.point == pytest.approx(ours.mean() - ref.mean())


def test_identical_rankers_give_zero_interval():
    ours, _, g = synthetic()
    ci = group_bootstrap_delta(ours, ours, g)
    assert (ci.point, ci.lo, ci.hi) == (0.0, 0.0, 0.0)


def test_matches_explicit_resampling_loop():
    """Same draws, computed the slow way: concatenate the drawn groups' directions and pool the rates."""
    ours, ref, g = synthetic(seed=5, n=300, groups=60)
    ci = group_bootstrap_delta(ours, ref, g, n_resamples=200, seed=3)
    labels = np.unique(g)
    draws = np.random.default_rng(3).integers(0, len(labels), size=(200, len(labels)))
    stats = []
    for row in draws:
        idx = np.concatenate([np.flatnonzero(g == labels[j]) for j in row])
        stats.append(ours[idx].mean() - ref[idx].mean())
    lo, hi = np.percentile(stats, [2.5, 97.5])
    assert (ci.lo, ci.hi) == (pytest.approx(lo), pytest.approx(hi))


def test_bad_input_is_rejected():
    with pytest.raises(ValueError, match="aligned"):
        group_bootstrap_delta(np.ones(3), np.ones(2), np.zeros(3))
    with pytest.raises(ValueError, match="empty"):
        group_bootstrap_delta(np.ones(0), np.ones(0), np.zeros(0))
    with pytest.raises(ValueError, match="missing"):
        group_bootstrap_delta(np.ones(2), np.ones(2), np.array(["a", None], dtype=object))
