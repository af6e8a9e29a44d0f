"""Effects, power and equivalence: every Δ, MDE, "directions needed" and Holm adjustment of the suite.

An effect is a scaled sum of per-group contributions u_g, tested by the group-level tests (``reports.group_tests``);
its null standard deviation is sqrt(Σ_g u_g²) (times the effect's scale), which is what the minimum detectable
effect is built from (docs/statistics.md#power).

``paired_difference`` computes Δ, its source-group bootstrap interval and SE, the test,
the null spread and the MDE of one measure on the same directions, once, for Table II,
pairwise comparisons, claims, pins and run comparisons alike. ``equivalence`` is the
two one-sided tests (TOST) that let "no change" be a decision (and the tests of a change beyond the margin),
``certifiable_margin`` the smallest margin they can certify on a sample and ``smallest_caught`` the smallest
change a pin catches (docs/statistics.md#tost).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import pandas as pd

from fixtures.settings import SEED
from reports.bootstrap import N_RESAMPLES, Ratio, group_bootstrap
from reports.group_tests import MIN_DIFFERING, N_PERMUTATIONS, MeanTest, mean_test
from reports.power import PowerDesign

#: Level of every decision and the power at which a minimum detectable effect is quoted.
ALPHA = 0.05
POWER = 0.80


def holm(p_values: np.ndarray | list[float]) -> np.ndarray:
    """Holm step-down adjusted p-values: sorted p_(i) × (m − i + 1), made monotone, capped at 1.

    NaN entries (tests that could not be made) are left out of the family and stay NaN.
    """
    p = np.asarray(p_values, dtype=float)
    if p.ndim != 1:
        raise ValueError(f"p-values must be 1-d; got shape {p.shape}")
    valid = ~np.isnan(p)
    if ((p[valid] < 0) | (p[valid] > 1)).any():
        raise ValueError(f"p-values must lie in [0, 1]; got {p[valid][(p[valid] < 0) | (p[valid] > 1)][:3].tolist()}")
    out = np.full(p.shape, np.nan)
    q = p[valid]
    order = np.argsort(q, kind="stable")
    m = len(q)
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * q[order]))
    inverse = np.empty(m, dtype=float)
    inverse[order] = adjusted
    out[valid] = inverse
    return out


def z_sum(level: float, power: float = POWER) -> float:
    """z_{1−level} + z_power: how many null SDs a one-sided level-``level`` test needs for that power."""
    if not 0 < level < 1 or not 0 < power < 1:
        raise ValueError(f"need 0 < level < 1 and 0 < power < 1; got {level}, {power}")
    z = NormalDist()
    return z.inv_cdf(1 - level) + z.inv_cdf(power)


def minimum_detectable_effect(null_sd: float, level: float = ALPHA / 2, power: float = POWER) -> float:
    """(z_{1−level} + z_power) × null SD: the smallest true effect a one-sided level-``level`` test finds
    with that power (docs/statistics.md#power). NaN when the spread is unknown (null SD 0 or NaN:
    no group differs, so the sample says nothing about the spread)."""
    if not math.isfinite(null_sd) or null_sd <= 0:
        return float("nan")
    return z_sum(level, power) * null_sd


def directions_needed(n: int, mde: float, effect: float) -> float:
    """Directions (at this sample's mix of groups) that would give the MDE's power at the observed effect.

    The null SD shrinks as 1/sqrt(n) when whole groups of the same kind are added, so the
    MDE at n' directions is MDE × sqrt(n / n'); it equals |effect| at n' = n × (MDE / effect)².
    NaN without an effect or an MDE.
    """
    if not (math.isfinite(mde) and math.isfinite(effect)) or effect == 0 or n < 1:
        return float("nan")
    return float(math.ceil(n * (mde / abs(effect)) ** 2))


@dataclass(frozen=True)
class GroupEffect:
    """An effect that is ``scale`` × Σ_g u_g, its decision test and its null spread (in the effect's units)."""

    effect: float
    null_sd: float
    test: MeanTest
    n: int
    n_groups: int

    @property
    def differing(self) -> int:
        """Groups whose contribution is non-zero: the sample the test's resolution rests on."""
        return self.test.differing


def group_effect(contributions: np.ndarray, labels: np.ndarray, scale: float, bound: float = 1.0,
                 n_permutations: int = N_PERMUTATIONS, seed: int = SEED,
                 min_differing: int = MIN_DIFFERING) -> GroupEffect:
    """Sum per-direction contributions by group, then test and measure their spread (see the module doc).

    ``bound`` is the largest |contribution| one direction can have (1 for a difference of values in
    [0, 1]); a group's bound is its size times it. ``min_differing`` is passed to ``mean_test``.
    """
    u = np.asarray(contributions, dtype=float)
    codes, uniques = pd.factorize(np.asarray(labels), sort=True)
    if len(codes) != len(u):
        raise ValueError(f"contributions ({len(u)}) and group labels ({len(codes)}) must be aligned")
    if (codes < 0).any():
        raise ValueError("group labels contain missing values; every direction needs a source group")
    if len(u) and np.abs(u).max() > bound * (1 + 1e-9):
        raise ValueError(f"a direction's contribution {np.abs(u).max():g} exceeds its bound {bound:g}")
    sums = np.bincount(codes, weights=u, minlength=len(uniques))
    largest = bound * float(np.bincount(codes).max()) if len(u) else bound
    return GroupEffect(scale * float(sums.sum()), scale * float(np.sqrt(np.sum(sums ** 2))),
                       mean_test(sums, largest, n_permutations, seed, min_differing), len(u), len(uniques))


@dataclass(frozen=True)
class PairedDifference:
    """first − second of one measure on the same directions, in the measure's units (``scale`` applied).

    ``lo``/``hi``/``se``: the 95% source-group bootstrap interval and SE of Δ; ``null_sd``: the
    sign-flip null SD sqrt(Σ_g D_g²) × scale / n; ``mde``: the two-sided-α MDE (one-sided α/2,
    80% power) from it, for the sign-flip test's normal limit (Table II's ``mde_pts``); ``test``: the decision
    test (``mean_test``); ``differing_groups``: groups whose summed difference is non-zero; ``discordant``:
    directions whose values differ; ``design``: what the decision test's own power is simulated on
    (``reports.power``); ``group_sums``: each group's summed difference D_g in the design's group order, what a
    decision interval inverts the test on (``reports.decision_intervals``).
    """

    effect: float
    lo: float
    hi: float
    se: float
    null_sd: float
    mde: float
    test: MeanTest
    n: int
    n_groups: int
    differing_groups: int
    discordant: int
    design: PowerDesign | None = None
    group_sums: tuple[float, ...] = ()


def paired_difference(first: np.ndarray, second: np.ndarray, labels: np.ndarray, scale: float = 1.0,
                      n_resamples: int = N_RESAMPLES, n_permutations: int = N_PERMUTATIONS,
                      seed: int = SEED) -> PairedDifference:
    """Δ = scale × mean(first − second) over aligned per-direction values in [0, 1], with every statistic the
    suite reports."""
    a, b = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired values must be aligned 1-d arrays; got {a.shape} and {b.shape}")
    _check_unit_interval(a, b)
    d = a - b
    n = len(d)
    boot = group_bootstrap({"d": d, "n": np.ones(n)}, labels, {"delta": Ratio("d", "n")}, n_resamples, seed)["delta"]
    tested = group_effect(d, labels, scale / n, 1.0, n_permutations, seed)
    codes = pd.factorize(np.asarray(labels), sort=True)[0]
    return PairedDifference(scale * boot.point, scale * boot.lo, scale * boot.hi, scale * boot.se, tested.null_sd,
                            minimum_detectable_effect(tested.null_sd), tested.test, n, tested.n_groups,
                            tested.differing, int((d != 0).sum()), PowerDesign.of(d, codes, scale),
                            tuple(np.bincount(codes, weights=d).tolist()))


def _check_unit_interval(*values: np.ndarray) -> None:
    """Paired measures take per-direction values in [0, 1]: the bound the tests rely on."""
    for v in values:
        if len(v) and not (np.isfinite(v).all() and v.min() >= 0 and v.max() <= 1):
            raise ValueError(f"paired per-direction values must lie in [0, 1]; got range [{np.nanmin(v):g}, "
                             f"{np.nanmax(v):g}]")


#: Sign vectors of the beyond-margin tests, whose units are the thousands of directions: 2,000 resolve the level
#: they are read at (p_beyond ≤ α: one side ≤ α/2, to 1/2,001) at a fifth of the default's cost per comparison.
BEYOND_PERMUTATIONS = 2000


@dataclass(frozen=True)
class Equivalence:
    """Two one-sided tests that |Δ| < margin: ``p`` = max of the two; below α reads "unchanged".

    The shifted tests with every direction its own unit, read on their other sides, test that Δ lies *beyond* the
    margin on these directions: ``p_below_lower`` against Δ ≥ −margin, ``p_above_upper`` against Δ ≤ margin;
    ``p_beyond`` (twice the smaller: either side) below α shows a change larger than the margin
    (docs/statistics.md#tost)."""

    margin: float
    p_above_lower: float
    p_below_upper: float
    p_below_lower: float = 1.0
    p_above_upper: float = 1.0

    @property
    def p(self) -> float:
        return max(self.p_above_lower, self.p_below_upper)

    @property
    def p_beyond(self) -> float:
        return min(1.0, 2 * min(self.p_below_lower, self.p_above_upper))


def equivalence(first: np.ndarray, second: np.ndarray, labels: np.ndarray, margin: float, scale: float = 1.0,
                n_permutations: int = N_PERMUTATIONS, seed: int = SEED, beyond: bool = True) -> Equivalence:
    """TOST of −margin < Δ < margin (Δ = scale × mean(first − second)) by the decision test of the shifted sums,
    and (``beyond``) the tests of Δ beyond the margin.

    Each bound is tested like Δ = 0 after moving it to 0: against Δ ≤ −margin the group
    contributions are D_g + (margin / scale) × n_g, tested for a positive sum; against
    Δ ≥ margin, D_g − (margin / scale) × n_g for a negative one (docs/statistics.md#tost). The same shifted
    differences with every direction its own unit, read on their other sides, test Δ beyond the margin: two runs
    on the same directions differ by rerun churn, direction by direction, and a regression concentrated in a few
    groups is no less a regression of these directions (docs/statistics.md#tost).
    """
    if not margin > 0:
        raise ValueError(f"an equivalence margin must be > 0; got {margin}")
    a, b = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    _check_unit_interval(a, b)
    d = a - b
    shift = margin / scale
    lower = group_effect(d + shift, labels, 1.0, 1.0 + shift, n_permutations, seed).test
    upper = group_effect(d - shift, labels, 1.0, 1.0 + shift, n_permutations, seed).test
    if not beyond or not d.any():  # identical values: Δ = 0 lies within any margin, nothing to test beyond it
        return Equivalence(margin, lower.p_greater, upper.p_less)
    units, draws = np.arange(len(d)), min(n_permutations, BEYOND_PERMUTATIONS)
    below = group_effect(d + shift, units, 1.0, 1.0 + shift, draws, seed).test.p_less
    above = group_effect(d - shift, units, 1.0, 1.0 + shift, draws, seed).test.p_greater
    return Equivalence(margin, lower.p_greater, upper.p_less, below, above)


#: Power at which a pin's smallest caught change is quoted: a regression that large fails the pin in 95% of reruns.
CATCH_POWER = 0.95


def smallest_caught(first: np.ndarray, second: np.ndarray, margin: float, scale: float = 1.0, alpha: float = ALPHA,
                    power: float = CATCH_POWER) -> float:
    """The smallest |Δ| the beyond-margin tests catch with ``power`` on these directions at their observed churn:
    margin + (z_{1−α/2} + z_power) × scale × sqrt(Σ_i d_i²) / n, the normal limit of the direction-level test
    whose spread is the discordant directions' (docs/statistics.md#tost). A change between the margin and this is
    beyond the margin but not certifiably caught: the pin says so. NaN without directions."""
    d = np.asarray(first, dtype=float) - np.asarray(second, dtype=float)
    if not len(d):
        return float("nan")
    z = NormalDist()
    return margin + (z.inv_cdf(1 - alpha / 2) + z.inv_cdf(power)) * scale * math.sqrt(float((d ** 2).sum())) / len(d)


def certifiable_margin(labels: np.ndarray, null_sd: float, scale: float = 1.0, alpha: float = ALPHA,
                       power: float = POWER, n_permutations: int = N_PERMUTATIONS, seed: int = SEED) -> float:
    """The smallest equivalence margin the TOST can certify on a sample of these groups (docs/statistics.md#tost).

    The larger of (a) the margin that identical outcomes reach (the design's floor: the tests'
    smallest p and, with few groups, the bound-aware test's) and (b) the margin the TOST reaches
    with ``power`` when nothing changed at this spread, (z_{1−α} + z_{(1+power)/2}) × null SD.
    ``inf`` when no margin up to the measure's whole range (``scale``) can be certified.
    """
    sizes = tuple(sorted(np.unique(np.asarray(labels), return_counts=True)[1].tolist()))
    floor = _identical_floor(sizes, scale, alpha, n_permutations, seed)
    spread = NormalDist().inv_cdf(1 - alpha) + NormalDist().inv_cdf((1 + power) / 2)
    return max(floor, spread * null_sd) if math.isfinite(null_sd) else floor


@functools.lru_cache(maxsize=64)
def _identical_floor(sizes: tuple[int, ...], scale: float, alpha: float, n_permutations: int, seed: int) -> float:
    """The smallest margin identical outcomes on groups of these sizes certify (a design fact, so cached)."""
    labels = np.repeat(np.arange(len(sizes)), sizes)
    zeros = np.zeros(len(labels))

    def reached(margin: float) -> bool:
        return equivalence(zeros, zeros, labels, margin, scale, n_permutations, seed, beyond=False).p <= alpha

    lo, hi = 1e-6 * scale, scale
    if not reached(hi):
        return float("inf")
    if reached(lo):
        return lo
    while hi / lo > 1.01:  # the TOST p of identical outcomes falls as the margin grows
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if reached(mid) else (mid, hi)
    return hi
