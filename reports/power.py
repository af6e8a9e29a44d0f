"""Power of the decision test itself: MDE, power and directions needed, by simulating ``mean_test`` on the sample.

The decision test (``reports.group_tests.mean_test``, docs/statistics.md#weak-null) is not the normal test whose
MDE is (z_{1−ℓ} + z_{0.80}) × null SD: with fewer than ``MIN_DIFFERING`` differing groups its bound-aware part
decides too, and there a normal MDE promises power the test does not have. So every power number the suite prints
is simulated through the test's own parts (``reports.group_tests.mean_test_rows``) on the sample's real design
(docs/statistics.md#power):

- **the outcome model**: the sample's groups and sizes as they are, each group keeping the size |D_g| of its
  observed summed difference with a sign drawn anew (the sign-flip test's own null: its SD is the reported null
  SD), moved by the effect in proportion to that size: D_g = |D_g| (±1 + c), capped at the group's bound, so the
  spread stays the observed one, as a location shift of the differing groups; groups that do not differ stay at
  0 (the guard sees the sample's own differing groups). The mean effect rises with c up to every differing group
  at its bound;
- **the MDE**: the smallest effect at which the test says *holds* at one-sided level ℓ in 80% of simulated
  samples (seeded common random numbers: power rises with the effect in every simulated sample), or ∞ when even
  the largest effect of the model does not reach it;
- **directions needed**: the sample's groups redrawn with replacement, as many as give 80% power at the
  observed effect (beyond ``SIMULATED_GROUPS`` groups the guard is long off and the normal formula is used).

Results are cached per design and level: a family's claims and Table II's rows ask about the same samples.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from fixtures.settings import SEED
from reports.group_tests import MIN_DIFFERING, mean_test_rows

#: Simulated samples per power estimate (SE about 2.8 points at 80%) and sign vectors per sign-flip part.
RUNS = 200
PERMUTATIONS = 1000
#: Power at which an MDE is quoted, and the largest resampled sample simulated for "directions needed".
TARGET = 0.80
SIMULATED_GROUPS = 4000
#: Names of the test every power number is for (claims.csv ``mde_test``, the plan, report.md).
DECISION_TEST = "decision test (mean_test), simulated"


@dataclass(frozen=True)
class PowerDesign:
    """What the decision test's power depends on: directions per group and the size |D_g| of each group's observed
    summed difference (every group of the sample, zeros included); ``scale`` turns a mean difference into the
    effect's unit (100: points), ``bound`` is the largest |difference| one direction may have."""

    sizes: tuple[int, ...]
    magnitudes: tuple[float, ...]
    scale: float
    bound: float = 1.0

    @classmethod
    def of(cls, differences: np.ndarray, codes: np.ndarray, scale: float, bound: float = 1.0) -> PowerDesign:
        """The design of per-direction differences with group codes 0..G−1."""
        codes = np.asarray(codes)
        sums = np.bincount(codes, weights=np.asarray(differences, dtype=float))
        return cls(tuple(np.bincount(codes).tolist()), tuple(np.round(np.abs(sums), 12).tolist()), float(scale),
                   float(bound))

    @property
    def n(self) -> int:
        return int(sum(self.sizes))

    def effect_at(self, shift: float, sizes: np.ndarray | None = None, magnitudes: np.ndarray | None = None) -> float:
        """The model's mean effect at shift c: Σ_g E clip(|D_g| (±1 + c), ±bound n_g) / n, in the effect's unit."""
        sizes = np.asarray(self.sizes if sizes is None else sizes, dtype=float)
        m = np.asarray(self.magnitudes if magnitudes is None else magnitudes, dtype=float)
        cap = self.bound * sizes
        mean = (np.minimum(m * (1 + shift), cap) + np.clip(m * (shift - 1), -cap, cap)) / 2
        return self.scale * float(mean.sum()) / float(sizes.sum())

    def shift_for(self, effect: float, sizes: np.ndarray | None = None,
                  magnitudes: np.ndarray | None = None) -> float:
        """The shift c whose mean effect is ``effect`` (> 0), or ∞ beyond the largest (every differing group at its
        bound)."""
        m = np.asarray(self.magnitudes if magnitudes is None else magnitudes, dtype=float)
        n_g = np.asarray(self.sizes if sizes is None else sizes, dtype=float)
        if not (m > 0).any():
            return float("inf")
        hi = float((n_g[m > 0] * self.bound / m[m > 0]).max()) + 1  # every differing group at its bound
        if effect >= self.effect_at(hi, sizes, magnitudes):
            return float("inf")
        lo = 0.0
        for _ in range(50):  # the mean effect rises with c
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if self.effect_at(mid, sizes, magnitudes) < effect else (lo, mid)
        return hi


def _power(design: PowerDesign, shifts: np.ndarray, level: float, runs: int, seed: int,
           sizes: np.ndarray | None = None, magnitudes: np.ndarray | None = None) -> np.ndarray:
    """Share of simulated samples in which the decision test's claimed side is ≤ ``level``, per shift c of the
    outcome model (module doc); the same signs for every shift (common random numbers)."""
    sizes = np.asarray(design.sizes if sizes is None else sizes)
    magnitudes = np.asarray(design.magnitudes if magnitudes is None else magnitudes, dtype=float)
    if not magnitudes.any():
        return np.zeros(len(shifts))
    signs = np.where(np.random.default_rng(seed).random((runs, len(magnitudes))) < 0.5, 1.0, -1.0)
    cap = design.bound * sizes
    shifts = np.asarray(shifts, dtype=float)
    sums = np.clip(magnitudes * (signs[None] + shifts[:, None, None]), -cap, cap).reshape(-1, len(magnitudes))
    greater, _ = mean_test_rows(sums, design.bound * float(sizes.max()), PERMUTATIONS, seed, MIN_DIFFERING)
    return (greater <= level).reshape(len(shifts), runs).mean(axis=1)


def power_at(design: PowerDesign, effect: float, level: float, runs: int = RUNS, seed: int = SEED) -> float:
    """The decision test's power at a true ``effect`` (either sign: the model is symmetric) on this design."""
    shift = design.shift_for(abs(effect)) if math.isfinite(effect) else float("inf")
    if not math.isfinite(shift):
        return float("nan")
    return float(_power(design, np.array([shift]), level, runs, seed)[0])


@functools.lru_cache(maxsize=512)
def decision_mde(design: PowerDesign, level: float, target: float = TARGET, runs: int = RUNS,
                 seed: int = SEED) -> float:
    """The smallest effect the decision test detects at one-sided ``level`` with power ``target`` on this design
    (see the module doc), to 1%: NaN when no group differs, ∞ when no effect of the model reaches it.

    The search starts from the normal limit's MDE (null SD sqrt(Σ D_g²) / n), which the decision test never beats
    by much, and bisects on the model's shift: power rises with it in every simulated sample."""
    m = np.asarray(design.magnitudes)
    if not m.any():
        return float("nan")
    z = NormalDist()
    normal = (z.inv_cdf(1 - level) + z.inv_cdf(target)) * design.scale * math.sqrt(float((m ** 2).sum())) / design.n
    top = float((np.asarray(design.sizes)[m > 0] * design.bound / m[m > 0]).max()) + 1

    def reached(shift: float) -> bool:
        return bool(_power(design, np.array([shift]), level, runs, seed)[0] >= target)

    start = design.shift_for(normal)
    lo, hi = (0.0, top) if not math.isfinite(start) else (0.8 * start, min(1.25 * start, top))
    if reached(lo):
        lo, hi = 0.0, lo
    while not reached(hi):
        if hi >= top:
            return float("inf")
        lo, hi = hi, min(2 * hi, top)
    while hi - lo > 0.01 * hi:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if reached(mid) else (mid, hi)
    return design.effect_at(hi)


@functools.lru_cache(maxsize=512)
def decision_directions_needed(design: PowerDesign, effect: float, level: float, target: float = TARGET,
                               normal: float = float("nan"), runs: int = RUNS // 2, seed: int = SEED) -> float:
    """Directions (the sample's groups redrawn with replacement) at which the decision test has power ``target``
    at a true effect equal to the observed ``effect``; NaN without an effect. Past ``SIMULATED_GROUPS`` groups it
    returns ``normal`` (the normal formula's count: the guard is long off there, see the module doc)."""
    if not any(design.magnitudes) or not math.isfinite(effect) or effect == 0:
        return float("nan")
    sizes, magnitudes = np.asarray(design.sizes), np.asarray(design.magnitudes)

    def power(groups: int) -> float:
        drawn = np.random.default_rng((seed, groups)).integers(0, len(sizes), groups)
        shift = design.shift_for(abs(effect), sizes[drawn], magnitudes[drawn])
        if not math.isfinite(shift):
            return 0.0
        return float(_power(design, np.array([shift]), level, runs, seed, sizes[drawn], magnitudes[drawn])[0])

    lo, hi = 0, len(sizes)
    while power(hi) < target:  # double until the redrawn sample has the power, or the simulation stops paying
        lo, hi = hi, 2 * hi
        if hi > SIMULATED_GROUPS:
            return normal
    while hi - lo > max(1, hi // 32):  # within 3% of the groups
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if power(mid) >= target else (mid, hi)
    return float(math.ceil(hi * sizes.mean()))
