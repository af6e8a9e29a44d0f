"""Decision intervals: the interval a claim's verdict is read from (docs/statistics.md#decision-intervals).

A claim is decided by Holm over both one-sided hypotheses of every claim in its family; its bootstrap interval is
unadjusted and only describes the effect, so a reader could see *inconclusive* beside a bootstrap interval that
excludes 0. The decision interval inverts the claim's own decision test at the levels Holm leaves it: the
compatible simultaneous confidence bounds of the Holm procedure (Strassburger & Bretz 2008, Statistics in Medicine
27:4914). With R the hypotheses Holm rejects in a family of M and k = M − |R| those it keeps:

- a side Holm rejects is bounded at 0, open: the claim holds (fails) exactly when its interval lies wholly above
  (below) 0. Holm's closed test says no more there unless it rejects every hypothesis of the family, which it never
  does here (a claim's two sides are never both rejected);
- a side Holm keeps is bounded at the δ where the decision test of the shifted null "Δ = δ" reaches one-sided level
  α / k: every δ the test does not reject at that level stays inside. Holm kept that side at 0 (its p > α / k), so
  the bound lies on the far side of 0 and the interval holds 0 on that side.

Together the bounds of a family cover every claim's effect with probability at least 1 − α, and a verdict and its
interval can never disagree (``agrees``). The shifted null is tested by the same test the verdict used
(``ShiftedTest``): the group contributions D_g − t n_g (H3: u_g − t F_g) through ``reports.group_tests.mean_test``
with the bound-aware part joining exactly when it joined at 0, or at a sequential stop the anytime-valid betting
test (``reports.sequential``).
"""
from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd

from fixtures.settings import SEED
from reports.group_tests import N_PERMUTATIONS, mean_test
from reports.sequential import sequential_test

#: The side of 0 a bound limits: ">" the lower bound (tests of Δ ≤ δ), "<" the upper one (tests of Δ ≥ δ).
SIDES = (">", "<")


@dataclass(frozen=True)
class ShiftedTest:
    """A claim's decision test read at any boundary δ: the effect is ``scale`` × Σ_g u_g, and the null "Δ = δ" moves
    each group's contribution to u_g − t w_g with t = δ / (``scale`` × Σ w), so that its sum is 0 exactly at Δ = δ.

    ``sums`` (u_g) and ``weights`` (w_g: the group's directions for a paired difference, its non-successes for H3)
    are per group, in sampling order for a sequential stop; ``bound`` is the largest |contribution| of one direction
    at Δ = 0 (a shifted one's is ``bound`` + |t|, each direction weighing at most 1); ``largest`` the largest group
    size of the design (a group's bound is that many directions'); ``guarded`` whether the bound-aware part joined
    the test at 0 (it joins at every δ then: the effective sample is the sample's, docs/statistics.md#weak-null);
    ``anytime`` a sequential stop's betting test; ``resolution`` how finely a bound is located, in the effect's
    unit (half its last printed digit)."""

    sums: tuple[float, ...]
    weights: tuple[float, ...]
    scale: float
    bound: float
    largest: float
    guarded: bool
    resolution: float
    anytime: bool = False
    seed: int = SEED
    n_permutations: int = N_PERMUTATIONS

    def __post_init__(self) -> None:
        if len(self.sums) != len(self.weights) or not len(self.sums):
            raise ValueError(f"a shifted test needs one weight per group sum; got {len(self.sums)} sums and "
                             f"{len(self.weights)} weights")
        if not self.scale > 0 or not sum(self.weights) > 0 or not self.resolution > 0:
            raise ValueError(f"a shifted test needs a positive scale, total weight and resolution; got {self.scale}, "
                             f"{sum(self.weights)}, {self.resolution}")

    @property
    def effect(self) -> float:
        return self.scale * float(np.sum(self.sums))

    @property
    def span(self) -> float:
        """The largest |Δ| the measure allows: every per-direction value in [0, 1] (H3: a share difference in
        [−1, 1]), so a bound never needs to go past it."""
        return self.scale * float(np.sum(self.weights))

    def p_values(self, delta: float) -> tuple[float, float]:
        """One-sided p-values (against Δ > δ, against Δ < δ) of the decision test of the null Δ = δ."""
        t = delta / self.span
        if self.anytime:
            seq = sequential_test(self.sums, self.weights, self.largest, self.span, boundary=delta)
            return float(seq.p_greater[-1]), float(seq.p_less[-1])
        shifted = np.asarray(self.sums) - t * np.asarray(self.weights)
        # min_differing: the bound-aware part joins at every δ exactly when it joined at 0 (see the class doc).
        test = mean_test(shifted, (self.bound + abs(t)) * self.largest, self.n_permutations, self.seed,
                         min_differing=len(shifted) + 1 if self.guarded else 0)
        return test.p_greater, test.p_less


@functools.lru_cache(maxsize=4096)
def kept_bound(test: ShiftedTest, side: str, level: float) -> float:
    """The far end, on ``side``'s side of the interval, of the δ values the decision test keeps at one-sided
    ``level``: for ">" the smallest δ ≤ 0 whose test of Δ ≤ δ has p > ``level`` (for "<" the largest δ ≥ 0 whose test
    of Δ ≥ δ has), located by bisection between 0, which Holm kept, and a rejected δ, rounded outward to the test's
    ``resolution``; the measure's range end when the test rejects nothing there.

    The bisection keeps 0 on the kept side whatever the test does in between, so the bound is never on the wrong
    side of 0: the interval holds 0 on every side Holm kept (``agrees``)."""
    if side not in SIDES:
        raise ValueError(f"side must be one of {SIDES}; got {side!r}")
    if not 0 < level < 1:
        raise ValueError(f"a level must lie in (0, 1); got {level}")
    sign = -1.0 if side == ">" else 1.0
    normal = NormalDist()
    target = normal.inv_cdf(level)

    def z(distance: float) -> float:
        """The side's p at δ = sign × distance on the normal scale: below ``target`` where the test rejects."""
        greater, less = test.p_values(sign * distance)
        return normal.inv_cdf(min(1 - 1e-12, max(1e-12, greater if side == ">" else less)))

    # A first guess from the normal limit of the test (its null SD at 0: scale × sqrt(Σ u_g²)), then out to the
    # range's end.
    spread = test.scale * math.sqrt(float(np.sum(np.square(test.sums))))
    inside, outside = 0.0, min(test.span, max(sign * test.effect - 1.1 * target * spread, test.resolution))
    z_in = z(0.0)
    if z_in <= target:
        raise ValueError(f"the decision test rejects Δ = 0 on side {side!r} at level {level:g}: that side's bound is 0")
    z_out = z(outside)
    while z_out > target:
        if outside >= test.span:
            return sign * test.span
        inside, z_in, outside = outside, z_out, min(test.span, 2 * outside)
        z_out = z(outside)
    # Bisection, with the step interpolated on the normal scale (where the p falls about linearly) while that step
    # halves the bracket, and a second look one resolution beyond an interpolated step, which usually closes it.
    interpolate = math.isfinite(z_in)
    while outside - inside > test.resolution:
        width = outside - inside
        if interpolate:
            middle = min(outside - 0.05 * width, max(inside + 0.05 * width,
                                                     inside + (z_in - target) / (z_in - z_out) * width))
        else:
            middle = inside + width / 2
        z_mid = z(middle)
        if z_mid > target:
            inside, z_in = middle, z_mid
            beyond = middle + test.resolution
            if interpolate and beyond < outside:
                z_beyond = z(beyond)
                inside, z_in, outside, z_out = ((beyond, z_beyond, outside, z_out) if z_beyond > target
                                                else (inside, z_in, beyond, z_beyond))
        else:
            outside, z_out = middle, z_mid
            before = middle - test.resolution
            if interpolate and before > inside:
                z_before = z(before)
                inside, z_in, outside, z_out = ((before, z_before, outside, z_out) if z_before > target
                                                else (inside, z_in, before, z_before))
        interpolate = outside - inside <= width / 2 and math.isfinite(z_in)
    return sign * outside


@dataclass(frozen=True)
class DecisionInterval:
    """A claim's decision interval: ``lo``/``hi`` in the effect's unit (NaN for a claim no test decides),
    ``level`` the one-sided level its kept sides were inverted at (α / k), ``open_lo``/``open_hi`` whether an end at 0
    is open (the side Holm rejected: the verdict rules 0 out)."""

    lo: float
    hi: float
    level: float = float("nan")
    open_lo: bool = False
    open_hi: bool = False

    @classmethod
    def none(cls) -> DecisionInterval:
        nan = float("nan")
        return cls(nan, nan)

    @property
    def defined(self) -> bool:
        return not (math.isnan(self.lo) or math.isnan(self.hi))

    def covers(self, value: float) -> bool:
        """Whether the interval holds ``value`` (an open end excludes its 0); an undefined one states nothing."""
        if not self.defined:
            return True
        return ((value > self.lo if self.open_lo else value >= self.lo)
                and (value < self.hi if self.open_hi else value <= self.hi))

    def hull(self, other: DecisionInterval) -> DecisionInterval:
        """The smallest interval holding both: what either of two families keeps (an end stays open only where both
        are open at the same 0). Undefined when either is."""
        if not (self.defined and other.defined):
            return DecisionInterval.none()
        lo, hi = min(self.lo, other.lo), max(self.hi, other.hi)
        open_lo = (self.open_lo or self.lo > lo) and (other.open_lo or other.lo > lo)
        open_hi = (self.open_hi or self.hi < hi) and (other.open_hi or other.hi < hi)
        return DecisionInterval(lo, hi, max(self.level, other.level), open_lo, open_hi)

    def text(self, digits: int = 2) -> str:
        """``(0, +8.67]``, ``[−4.20, +0.51]``: signed, an end the verdict rules out shown open at 0; ``[—]`` when
        undefined."""
        if not self.defined:
            return "[—]"
        lo = "(0" if self.open_lo else f"[{self.lo:+.{digits}f}"
        hi = "0)" if self.open_hi else f"{self.hi:+.{digits}f}]"
        return f"{lo}, {hi}"


def holm_interval(test: ShiftedTest | None, claimed: str, claimed_rejected: bool, opposite_rejected: bool,
                  level: float, bound=kept_bound) -> DecisionInterval:
    """A claim's decision interval (see the module doc) from which of its sides Holm rejected and the level α / k of
    the sides it kept; ``bound`` locates a kept side's end (``kept_bound``, or a memoized twin of it). Undefined
    without a test to invert."""
    if test is None:
        return DecisionInterval.none()
    if claimed not in SIDES:
        raise ValueError(f"a claimed side must be one of {SIDES}; got {claimed!r}")
    lower_rejected, upper_rejected = ((claimed_rejected, opposite_rejected) if claimed == ">"
                                      else (opposite_rejected, claimed_rejected))
    lo = 0.0 if lower_rejected else bound(test, ">", level)
    hi = 0.0 if upper_rejected else bound(test, "<", level)
    return DecisionInterval(lo, hi, level, lower_rejected, upper_rejected)


def agrees(status: str, claimed: str, interval: DecisionInterval) -> bool:
    """Whether a verdict and its decision interval say the same: *holds* ⟺ the interval lies on the claimed side of
    0, open at 0; *fails* ⟺ on the other side; *inconclusive* ⟺ it holds 0 (or no test decides the claim: no
    interval)."""
    if not interval.defined:
        return status == "inconclusive"
    above = interval.open_lo and interval.lo == 0.0 and interval.hi >= 0.0
    below = interval.open_hi and interval.hi == 0.0 and interval.lo <= 0.0
    holds, fails = (above, below) if claimed == ">" else (below, above)
    inside = not interval.open_lo and not interval.open_hi and interval.lo <= 0.0 <= interval.hi
    return {"holds": holds, "fails": fails, "inconclusive": inside}.get(status, False)


def published(row: Mapping[str, Any]) -> DecisionInterval:
    """A claims.csv row's decision interval: the file keeps its ends and level, and an end at 0 on the side its verdict
    decides is open (the module doc); undefined where the row has none (a claim no test decides, a gate, a pin)."""
    def number(key: str) -> float:
        value = row.get(key)
        return float("nan") if value is None or pd.isna(value) else float(value)

    claimed, status = str(row.get("claimed") or "").strip()[:1], row.get("status")
    decided = claimed if status == "holds" else {">": "<", "<": ">"}.get(claimed) if status == "fails" else None
    return DecisionInterval(number("decision_lo"), number("decision_hi"), number("decision_level"),
                            decided == ">", decided == "<")


def row_agrees(row: Mapping[str, Any]) -> bool:
    """Whether a published claim's verdict agrees with its published decision interval (``agrees``): what every
    claim spec checks on every run."""
    claimed = str(row.get("claimed") or "").strip()[:1]
    return claimed in SIDES and agrees(str(row.get("status")), claimed, published(row))
