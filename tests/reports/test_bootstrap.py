"""Source-group bootstrap: hand-enumerable cases, determinism, pinned numbers, and an explicit-loop oracle."""
from __future__ import annotations

import numpy as np
import pytest


from reports.bootstrap import BootstrapInterval, Ratio, RatioDifference, group_bootstrap


def group_bootstrap_delta(success, reference, groups, n_resamples: int = 2000, seed: int = 13) -> BootstrapInterval:
    """mean(success) − mean(reference) resampling whole groups: a pooled Δ, as Table II's delta_pts."""
    a, b = np.asarray(success, dtype=float), np.asarray(reference, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"success and reference must be aligned 1-d arrays; got {a.shape}, {b.shape}")
    return group_bootstrap({"delta": a - b, "n": np.ones(a.shape)}, groups, {"delta": Ratio("delta", "n")},
                           n_resamples, seed)["delta"]


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
    with pytest.raises(ValueError, match="'x' holds 1 non-finite"):
        group_bootstrap({"x": np.array([1.0, np.nan]), "n": np.ones(2)}, np.zeros(2), {"m": Ratio("x", "n")})
    with pytest.raises(ValueError, match="aligned"):
        group_bootstrap({"x": np.ones(3), "n": np.ones(2)}, np.zeros(3), {"m": Ratio("x", "n")})


def test_delta_is_pinned_to_the_previous_implementation():
    """README numbers must not move: exact floats of the pre-generalization code (commit 6dc5f5e) on the same inputs."""
    ours, ref, g = synthetic()
    ci = group_bootstrap_delta(ours, ref, g, seed=13)
    assert [x.hex() for x in (ci.point, ci.lo, ci.hi)] == ["0x1.0d833d450b4aap-3", "0x1.e4d6334d8d58bp-4",
                                                          "0x1.28ba4defd2f4fp-3"]
    assert ci.n_groups == 687
    rng = np.random.default_rng(2)  # non-binary values (reciprocal ranks) keep bit-identity too
    a, b, groups = 1.0 / rng.integers(1, 300, 500), 1.0 / rng.integers(1, 300, 500), rng.integers(0, 90, 500)
    ci = group_bootstrap_delta(a, b, groups, seed=13)
    assert [x.hex() for x in (ci.point, ci.lo, ci.hi)] == ["0x1.6c140470d0ad5p-9", "-0x1.4d97dd750698ep-8",
                                                          "0x1.8791abbc2216dp-7"]


def test_ratio_statistics_by_hand():
    """g1: 3 directions, x = (1, 2, 3), units u = (1, 0, 0); g2: 1 direction, x = 10, u = 0.
    Resamples (g1,g1), (g1,g2) or (g2,g1), (g2,g2) come with probability 1/4, 1/2, 1/4, so the 2.5th and 97.5th
    percentiles of 2,000 draws are the values of the two extreme resamples."""
    values = {"x": np.array([1.0, 2.0, 3.0, 10.0]), "n": np.ones(4), "u": np.array([1.0, 0.0, 0.0, 0.0])}
    groups = np.array(["g1", "g1", "g1", "g2"])
    out = group_bootstrap(values, groups, {"mean": Ratio("x", "n"),
                                           "diff": RatioDifference(Ratio("x", "n"), Ratio("u", "n"))}, seed=5)
    # mean x: 12/6 = 2, 16/4 = 4, 20/2 = 10.
    assert out["mean"].point == pytest.approx(4.0) and (out["mean"].lo, out["mean"].hi) == (2.0, 10.0)
    # mean x - mean u: 2 - 2/6, 4 - 1/4, 10 - 0.
    assert out["diff"].point == pytest.approx(3.75)
    assert (out["diff"].lo, out["diff"].hi) == (pytest.approx(5 / 3), 10.0)


def test_undefined_resample_is_refused():
    values = {"x": np.array([1.0, 2.0]), "u": np.array([1.0, 0.0])}
    with pytest.raises(ValueError, match="'per_unit' is undefined .* in [0-9]+ resample"):
        group_bootstrap(values, np.array(["g1", "g2"]), {"per_unit": Ratio("x", "u")})


def test_general_bootstrap_matches_explicit_loop():
    """A ratio of sums and a difference of ratios with different denominators, the slow way on the same draws."""
    rng = np.random.default_rng(8)
    n, n_groups = 400, 50
    g = rng.integers(0, n_groups, n)
    rr_a, rr_b = 1.0 / rng.integers(1, 100, n), 1.0 / rng.integers(1, 100, n)
    pairs = (rng.random(n) < 0.4).astype(float)
    hits = pairs * (rng.random(n) < 0.6)
    values = {"rr_a": rr_a, "rr_b": rr_b, "n": np.ones(n), "hits": hits, "pairs": pairs}
    stats = {"mrr_a": Ratio("rr_a", "n"), "d": RatioDifference(Ratio("hits", "pairs"), Ratio("rr_b", "n"))}
    out = group_bootstrap(values, g, stats, n_resamples=300, seed=11)
    labels = np.unique(g)
    draws = np.random.default_rng(11).integers(0, len(labels), size=(300, len(labels)))
    mrr, d = [], []
    for row in draws:
        idx = np.concatenate([np.flatnonzero(g == labels[j]) for j in row])
        mrr.append(rr_a[idx].mean())
        d.append(hits[idx].sum() / pairs[idx].sum() - rr_b[idx].mean())
    for name, reps, point in (("mrr_a", mrr, rr_a.mean()), ("d", d, hits.sum() / pairs.sum() - rr_b.mean())):
        lo, hi = np.percentile(reps, [2.5, 97.5])
        assert (out[name].point, out[name].lo, out[name].hi) == (pytest.approx(point), pytest.approx(lo), pytest.approx(hi))
        assert out[name].se == pytest.approx(np.std(reps, ddof=1))
        assert (out[name].n_groups, out[name].n_resamples, out[name].seed) == (len(labels), 300, 11)
