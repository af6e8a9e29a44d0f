"""Power of the decision test itself: MDE, power and directions needed, by simulating ``mean_test`` on the sample.

The decision test (``reports.group_tests.mean_test``, docs/statistics.md#weak-null) is not the normal test whose
MDE is (z_{1−ℓ} + z_{0.80}) × null SD: with fewer than ``MIN_DIFFERING`` differing groups its bound-aware part
decides too, and there a normal MDE promises power the test does not have. So every power number the suite prints
is simulated through the test's own parts (``reports.group_tests.mean_test_rows``) on the sample's real design
(docs/statistics.md#power):

- **the outcome model**: the sample's groups, sizes and discordant directions as observed, each discordant
  direction keeping its magnitude |d_i| and drawing its sign anew, a gain with probability p, so that the mean
  difference is (2p − 1) Σ|d_i| / n; p = ½ is the null, p = 1 the largest effect this discordance allows;
- **the MDE**: the smallest effect at which the test says *holds* at one-sided level ℓ in 80% of simulated
  samples (seeded common random numbers: power rises with the effect in every simulated sample), or ∞ when even
  the largest effect the discordance allows does not reach it;
- **directions needed**: the sample's groups redrawn with replacement, as many as give 80% power at the
  observed effect (beyond ``SIMULATED_GROUPS`` groups the guard is long off and the normal formula is used).

Results are cached per design and level: a family's claims and Table II's rows ask about the same samples.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

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
    """What the decision test's power depends on: directions per group (every group of the sample), and for each
    discordant direction its group and its |difference|; ``scale`` turns a mean difference into the effect's
    unit (100: points), ``bound`` is the largest |difference| one direction may have."""

    sizes: tuple[int, ...]
    groups: tuple[int, ...]
    magnitudes: tuple[float, ...]
    scale: float
    bound: float = 1.0

    @classmethod
    def of(cls, differences: np.ndarray, codes: np.ndarray, scale: float, bound: float = 1.0) -> PowerDesign:
        """The design of per-direction differences with group codes 0..G−1."""
        d = np.asarray(differences, dtype=float)
        codes = np.asarray(codes)
        keep = d != 0
        return cls(tuple(np.bincount(codes).tolist()), tuple(codes[keep].tolist()),
                   tuple(np.abs(d[keep]).tolist()), float(scale), float(bound))

    @property
    def n(self) -> int:
        return int(sum(self.sizes))

    @property
    def largest_effect(self) -> float:
        """The largest effect the observed discordance allows (every discordant direction a gain)."""
        return self.scale * float(sum(self.magnitudes)) / self.n if self.n else float("nan")


def _sums(sizes: np.ndarray, groups: np.ndarray, magnitudes: np.ndarray, gain: np.ndarray,
          uniforms: np.ndarray) -> np.ndarray:
    """(len(gain) × runs, G) group sums: each discordant direction a gain with probability ``gain`` (one per row
    block), its magnitude kept; ``uniforms`` (runs, discordant) are shared by every probability."""
    signs = np.where(uniforms[None] < gain[:, None, None], 1.0, -1.0) * magnitudes  # (effects, runs, k)
    out = np.zeros((len(gain), uniforms.shape[0], len(sizes)))
    if len(groups):
        order = np.argsort(groups, kind="stable")
        g = groups[order]
        starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
        out[..., g[starts]] = np.add.reduceat(signs[..., order], starts, axis=-1)
    return out.reshape(-1, len(sizes))


def _power(design: PowerDesign, effects: np.ndarray, level: float, runs: int, seed: int,
           sizes: np.ndarray | None = None, groups: np.ndarray | None = None,
           magnitudes: np.ndarray | None = None) -> np.ndarray:
    """Share of simulated samples in which the decision test's claimed side is ≤ ``level``, per effect (> 0)."""
    sizes = np.asarray(design.sizes if sizes is None else sizes)
    groups = np.asarray(design.groups if groups is None else groups, dtype=int)
    magnitudes = np.asarray(design.magnitudes if magnitudes is None else magnitudes, dtype=float)
    n, total = int(sizes.sum()), float(magnitudes.sum())
    if total == 0:
        return np.zeros(len(effects))
    gain = np.clip((1 + np.asarray(effects, dtype=float) / design.scale * n / total) / 2, 0.0, 1.0)
    uniforms = np.random.default_rng(seed).random((runs, len(magnitudes)))
    sums = _sums(sizes, groups, magnitudes, gain, uniforms)
    greater, _ = mean_test_rows(sums, design.bound * float(sizes.max()), PERMUTATIONS, seed, MIN_DIFFERING)
    return (greater <= level).reshape(len(gain), runs).mean(axis=1)


def power_at(design: PowerDesign, effect: float, level: float, runs: int = RUNS, seed: int = SEED) -> float:
    """The decision test's power at a true ``effect`` (either sign: the model is symmetric) on this design."""
    if not math.isfinite(effect) or abs(effect) > design.largest_effect:
        return float("nan")
    return float(_power(design, np.array([abs(effect)]), level, runs, seed)[0])


@functools.lru_cache(maxsize=512)
def decision_mde(design: PowerDesign, level: float, target: float = TARGET, runs: int = RUNS,
                 seed: int = SEED) -> float:
    """The smallest effect the decision test detects at one-sided ``level`` with power ``target`` on this design
    (see the module doc), to 1%: NaN when no direction differs, ∞ when the discordance allows no such effect.

    The search starts from the normal limit's MDE under the outcome model (null SD sqrt(Σ|d_i|²) / n), which the
    decision test never beats by much, and bisects: power rises with the effect in every simulated sample."""
    top = design.largest_effect
    if not design.magnitudes or not top > 0:
        return float("nan")
    from reports.stats import z_sum

    normal = z_sum(level, target) * design.scale * math.sqrt(sum(m * m for m in design.magnitudes)) / design.n

    def reached(effect: float) -> bool:
        return bool(_power(design, np.array([effect]), level, runs, seed)[0] >= target)

    lo, hi = min(0.8 * normal, top), min(1.25 * normal, top)
    if reached(lo):
        lo, hi = 0.0, lo
    while not reached(hi):
        if hi >= top:
            return float("inf")
        lo, hi = hi, min(2 * hi, top)
    while hi - lo > 0.01 * hi:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if reached(mid) else (mid, hi)
    return float(hi)


@functools.lru_cache(maxsize=512)
def decision_directions_needed(design: PowerDesign, effect: float, level: float, target: float = TARGET,
                               normal: float = float("nan"), runs: int = RUNS // 2, seed: int = SEED) -> float:
    """Directions (the sample's groups redrawn with replacement) at which the decision test has power ``target``
    at a true effect equal to the observed ``effect``; NaN without an effect. Past ``SIMULATED_GROUPS`` groups it
    returns ``normal`` (the normal formula's count: the guard is long off there, see the module doc)."""
    if not design.magnitudes or not math.isfinite(effect) or effect == 0:
        return float("nan")
    sizes = np.asarray(design.sizes)
    per_group = [[] for _ in sizes]
    for g, m in zip(design.groups, design.magnitudes):
        per_group[g].append(m)

    def power(groups: int) -> float:
        drawn = np.random.default_rng((seed, groups)).integers(0, len(sizes), groups)
        mags = [np.asarray(per_group[g]) for g in drawn]
        codes = np.repeat(np.arange(groups), [len(m) for m in mags])
        return float(_power(design, np.array([abs(effect)]), level, runs, seed, sizes[drawn], codes,
                            np.concatenate(mags) if codes.size else np.zeros(0))[0])

    g0 = len(sizes)
    lo, hi = 0, g0
    while power(hi) < target:  # double until the redrawn sample has the power, or the simulation stops paying
        lo, hi = hi, 2 * hi
        if hi > SIMULATED_GROUPS:
            return normal
    while hi - lo > max(1, hi // 32):  # within 3% of the groups
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if power(mid) >= target else (mid, hi)
    return float(math.ceil(hi * sizes.mean()))
