"""Source-group bootstrap of statistics built from group-level sums (SPEC §4).

Directions of one source group share passages or queries, so they are resampled
together: each resample draws whole groups with replacement. Every statistic the
suite bootstraps (a pooled rate, a mean, a difference of either, a ratio of sums) is
a function of the drawn groups' column totals, so one draw matrix serves them all:
each column is summed per group once, gathered for all 2,000 resamples in one
indexing step, and each statistic is then applied to whole arrays of totals.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import pandas as pd

from fixtures.settings import SEED

N_RESAMPLES = 2000
CONFIDENCE = 0.95
#: Two-sided level and power at which a minimum detectable effect is quoted (issue 12: α 0.05, 80% power).
ALPHA = 0.05
POWER = 0.80

#: A statistic maps column totals (scalars for the point estimate, arrays over resamples) to its value(s).
Statistic = Callable[[Mapping[str, np.ndarray]], np.ndarray]


@dataclass(frozen=True)
class BootstrapInterval:
    """Point estimate, percentile interval and bootstrap standard error of one statistic (in its own units)."""

    point: float
    lo: float
    hi: float
    se: float
    n_groups: int
    n_resamples: int
    seed: int
    confidence: float


@dataclass(frozen=True)
class Ratio:
    """sum(numerator) / sum(denominator) over the drawn directions: a pooled rate or a mean.

    A mean is a ratio with a column of ones as denominator; a difference of means over
    the same directions is the ratio of the per-direction difference, which keeps
    large groups weighted by their size exactly as in the point estimate.
    """

    numerator: str
    denominator: str

    def __call__(self, totals: Mapping[str, np.ndarray]) -> np.ndarray:
        return np.asarray(totals[self.numerator], dtype=float) / totals[self.denominator]


@dataclass(frozen=True)
class RatioDifference:
    """first − second for two ratios whose denominators may differ (e.g. two rates over different units)."""

    first: Ratio
    second: Ratio

    def __call__(self, totals: Mapping[str, np.ndarray]) -> np.ndarray:
        return self.first(totals) - self.second(totals)


def _checked(values: Mapping[str, np.ndarray], groups: np.ndarray | pd.Series, n_resamples: int,
             confidence: float) -> tuple[dict[str, np.ndarray], np.ndarray]:
    labels = np.asarray(groups)
    columns = {name: np.asarray(v, dtype=float) for name, v in values.items()}
    if not columns:
        raise ValueError("group_bootstrap needs at least one value column")
    shapes = {name: c.shape for name, c in columns.items()}
    if labels.ndim != 1 or any(s != labels.shape for s in shapes.values()):
        raise ValueError(f"value columns and groups must be aligned 1-d arrays; got groups {labels.shape}, columns {shapes}")
    if len(labels) == 0:
        raise ValueError("cannot bootstrap an empty population")
    if pd.isna(labels).any():
        raise ValueError("group labels contain missing values; every direction needs a source group")
    for name, c in columns.items():
        if not np.isfinite(c).all():
            raise ValueError(f"value column {name!r} holds {int((~np.isfinite(c)).sum())} non-finite value(s); "
                             f"a bootstrapped statistic needs every direction's value")
    if not 0 < confidence < 1 or n_resamples < 1:
        raise ValueError(f"need 0 < confidence < 1 and n_resamples >= 1; got {confidence}, {n_resamples}")
    return columns, labels


def group_bootstrap(values: Mapping[str, np.ndarray], groups: np.ndarray | pd.Series,
                    statistics: Mapping[str, Statistic], n_resamples: int = N_RESAMPLES, seed: int = SEED,
                    confidence: float = CONFIDENCE) -> dict[str, BootstrapInterval]:
    """Percentile intervals of several statistics of per-direction ``values``, resampling whole groups.

    ``values`` maps column names to per-direction arrays aligned with ``groups``;
    each statistic receives a mapping of column totals. The point estimate uses the
    population's totals, each resample the totals of its drawn groups; all statistics
    share one draw matrix (seeded), so their intervals come from the same resamples.
    A statistic undefined in some resample (a zero denominator) is an error: bootstrap
    over the groups that hold the population instead.
    """
    columns, labels = _checked(values, groups, n_resamples, confidence)
    codes, uniques = pd.factorize(labels, sort=True)
    n_groups = len(uniques)
    draws = np.random.default_rng(seed).integers(0, n_groups, size=(n_resamples, n_groups))
    totals = {name: c.sum() for name, c in columns.items()}
    drawn = {name: np.bincount(codes, weights=c, minlength=n_groups)[draws].sum(axis=1) for name, c in columns.items()}
    tail = (1 - confidence) / 2 * 100
    out: dict[str, BootstrapInterval] = {}
    for name, statistic in statistics.items():
        with np.errstate(divide="ignore", invalid="ignore"):
            point = float(statistic(totals))
            replicates = np.asarray(statistic(drawn), dtype=float)
        if replicates.shape != (n_resamples,):
            raise ValueError(f"statistic {name!r} returned shape {replicates.shape} for {n_resamples} resamples")
        undefined = int((~np.isfinite(replicates)).sum())
        if undefined or not np.isfinite(point):
            raise ValueError(f"statistic {name!r} is undefined on the population or in {undefined} resample(s) "
                             f"(zero denominator?)")
        lo, hi = np.percentile(replicates, [tail, 100 - tail])
        se = float(replicates.std(ddof=1)) if n_resamples > 1 else float("nan")
        out[name] = BootstrapInterval(point, float(lo), float(hi), se, n_groups, n_resamples, seed, confidence)
    return out


def group_bootstrap_delta(success: np.ndarray, reference: np.ndarray, groups: np.ndarray | pd.Series,
                          n_resamples: int = N_RESAMPLES, seed: int = SEED,
                          confidence: float = CONFIDENCE) -> BootstrapInterval:
    """Percentile interval of mean(success) - mean(reference), resampling whole groups.

    ``success`` and ``reference`` are per-direction 0/1 outcomes aligned with
    ``groups``. The statistic of a resample is sum(Δ over drawn directions) / number
    of drawn directions, i.e. the difference of pooled rates, so large groups weigh
    by their size exactly as in the point estimate.
    """
    a = np.asarray(success, dtype=float)
    b = np.asarray(reference, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"success and reference must be aligned 1-d arrays; got {a.shape}, {b.shape}")
    values = {"delta": a - b, "n": np.ones(a.shape)}
    return group_bootstrap(values, groups, {"delta": Ratio("delta", "n")}, n_resamples, seed, confidence)["delta"]


def minimum_detectable_effect(se: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """(z_{1−α/2} + z_power) × se: the smallest true effect a two-sided level-α test detects with that power.

    Normal approximation for an estimate with standard error ``se`` (here the
    bootstrap SE of a Δ), so an effect below it reads as underpowered, not as absent.
    """
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise ValueError(f"need 0 < alpha < 1 and 0 < power < 1; got {alpha}, {power}")
    z = NormalDist()
    return (z.inv_cdf(1 - alpha / 2) + z.inv_cdf(power)) * se


def planning_mde(n: int, discordance: float, alpha: float = ALPHA, power: float = POWER,
                 design_effect: float = 1.0) -> float:
    """Smallest Δ strict (rate units) a paired comparison of ``n`` directions detects, for planning a sample.

    Per direction the difference of two 0/1 outcomes is −1, 0 or +1 and is non-zero
    with probability ``discordance``; under H0 its variance is the discordance, so
    SE(Δ) = sqrt(discordance × design_effect / n), where ``design_effect`` ≥ 1
    inflates the variance for directions clustered in source groups. The MDE is
    then (z_{1−α/2} + z_power) × SE, the same formula as the bootstrap-based MDE.
    """
    if n < 1 or not 0 <= discordance <= 1 or design_effect <= 0:
        raise ValueError(f"need n >= 1, 0 <= discordance <= 1 and design_effect > 0; got {n}, {discordance}, {design_effect}")
    return minimum_detectable_effect(float(np.sqrt(discordance * design_effect / n)), alpha, power)


def paired_mde(se: float, differences: np.ndarray) -> float:
    """MDE of a paired Δ: the larger of the bootstrap-SE MDE and the analytic one, ``planning_mde(n, mean(d²))``.

    mean(d²) is the variance of the per-direction differences under "no effect" (for 0/1
    outcomes: the share of discordant directions). A bootstrap over a handful of groups can
    have no spread at all (every resample draws the same two groups' Δ), which would call any
    effect detectable; the analytic floor keeps a 4-direction sample from deciding anything.
    """
    d = np.asarray(differences, dtype=float)
    if len(d) == 0:
        return float("nan")
    return max(minimum_detectable_effect(se), planning_mde(len(d), float(np.mean(d * d))))
