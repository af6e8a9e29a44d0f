"""Source-group bootstrap of statistics built from group-level sums (docs/statistics.md#intervals).

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

import numpy as np
import pandas as pd

from fixtures.settings import SEED

N_RESAMPLES = 2000
CONFIDENCE = 0.95

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
