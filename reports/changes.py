"""Whether a measure changed between two runs: changed, unchanged or undetermined, direction by direction.

Two runs that share the pool snapshot evaluated the same directions, so a measure is compared as
a paired experiment (docs/statistics.md#comparisons). With a margin declared in the profile (``[margins]``: e.g.
1 point of strict preference, 0.01 MRR) each answer keeps its own rate (docs/statistics.md#tost):

- **changed**: only when the tests of Δ beyond the margin, every direction its own unit, decide it (``p_beyond``
  ≤ α): a true change inside the margin is called changed in at most α of reruns, whatever the rerun churn; a
  change beyond the margin smaller than ``catches``, what they catch in 95% of reruns, is said to be so;
- **unchanged**: the two one-sided tests (TOST) certify |Δ| within the margin; **changed within margin** when the
  two-sided paired test (``reports.group_tests.mean_test``) also rejects: a real change smaller than the margin;
- **undetermined**: neither, with the smallest margin the sample could certify (``certifiable``); when the
  declared margin is below it and the observed |Δ| is within the margin, **margin unreachable**: said once, in
  the row, and not a warning (a larger observed change stays *undetermined*: never passed silently).

Without a margin any change is beyond it: the two-sided paired test decides *changed*, else *undetermined*.
Without per-direction outcomes a pin falls back to its tolerance (``tolerance_change``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from fixtures.settings import SEED
from reports.measures import aggregate, paired_measure
from reports.outcomes import outcome_columns
from reports.stats import ALPHA, certifiable_margin, equivalence, paired_difference, smallest_caught

Decision = Literal["changed", "changed within margin", "unchanged", "margin unreachable", "undetermined"]


@dataclass(frozen=True)
class ChangeVerdict:
    """One measure of one ranker, now against then: the decision and the numbers it rests on (Δ = now − then).

    ``basis`` says how it was decided: ``paired`` (the tests above, on ``n`` common
    directions) or ``tolerance`` (|Δ| against a pin's tolerance, without per-direction outcomes).
    """

    decision: Decision
    basis: str
    now: float
    then: float
    delta: float
    lo: float = float("nan")
    hi: float = float("nan")
    p_changed: float = float("nan")
    p_unchanged: float = float("nan")
    margin: float = float("nan")
    n: int = 0
    certifiable: float = float("nan")
    differing_groups: int = 0
    discordant: int = 0
    p_beyond: float = float("nan")
    #: The smallest |Δ| (the margin's unit) this comparison catches in 95% of reruns at the observed churn, and
    #: whether the observed change lies beyond the margin without being decided ``changed``.
    catches: float = float("nan")
    uncaught: bool = False

    def message(self) -> str:
        """Old, new, Δ, interval, p-values, the effective sample and the certifiable margin in one line."""
        text = f"{self.decision}: then {self.then:.6g}, now {self.now:.6g}, Δ {self.delta:+.6g}"
        if self.basis == "paired":
            text += (f" [{self.lo:+.4g}, {self.hi:+.4g}] on {self.n} common directions ({self.differing_groups} "
                     f"groups and {self.discordant} directions differ); paired p {self.p_changed:.2g}"
                     + (f", TOST p {self.p_unchanged:.2g} within ±{self.margin:g}, p {self.p_beyond:.2g} beyond it"
                        if math.isfinite(self.margin) else ", no margin declared"))
            if math.isfinite(self.certifiable) or self.certifiable == float("inf"):
                text += f"; the smallest margin this sample can certify: ±{self.certifiable:.3g}"
            if math.isfinite(self.catches):
                text += f"; it catches a change beyond ±{self.catches:.3g} in 95% of reruns"
                if self.uncaught:
                    text += ": this change is beyond the margin but below that, so it is not certifiably caught"
        else:
            text += f" ({self.basis})"
        return text


def decide_change(p_changed: float, p_unchanged: float, alpha: float = ALPHA, reachable: bool = True,
                  p_beyond: float | None = None, within: bool = True) -> Decision:
    """The decision of the module doc from the paired p, the TOST p, the p that Δ lies beyond the margin (None: no
    margin declared, so the paired test is the test of any change), whether the margin is certifiable here and
    whether the observed |Δ| is within it."""
    if (p_changed if p_beyond is None else p_beyond) <= alpha:
        return "changed"
    if p_unchanged <= alpha:
        return "changed within margin" if p_changed <= alpha else "unchanged"
    return "margin unreachable" if not reachable and within else "undetermined"


def paired_change(column: str, now: pd.DataFrame, then: pd.DataFrame, labels: np.ndarray, margin: float | None,
                  seed: int = SEED) -> ChangeVerdict:
    """A Table II ``column`` of one ranker, now vs then, from per-direction outcomes on the same qids (aligned).

    Values, Δ and its interval are stated in the column's own unit (a count column counts
    directions); the test and the margin are on the paired measure's scale (points, MRR).
    """
    measure = paired_measure(column)
    if len(now) != len(then) or not np.array_equal(now["qid"].to_numpy(), then["qid"].to_numpy()):
        raise ValueError("paired_change needs both runs' outcomes on the same directions, in the same order")
    a, b = outcome_columns(now, "outcomes now"), outcome_columns(then, "outcomes then")
    x, y = measure.values(a), measure.values(b)
    diff = paired_difference(x, y, labels, measure.scale, seed=seed)
    tost = equivalence(x, y, labels, margin, measure.scale, seed=seed) if margin else None
    p_unchanged, p_beyond = (tost.p, tost.p_beyond) if tost else (float("nan"), float("nan"))
    # The certifiable margin is needed (and computed) only where the TOST did not certify the declared one.
    certifiable = (certifiable_margin(labels, diff.null_sd, measure.scale, seed=seed)
                   if margin and not p_unchanged <= ALPHA else float("nan"))
    n = len(now)
    catches = smallest_caught(x, y, margin, measure.scale) if margin else float("nan")
    decision = decide_change(diff.test.p_two_sided, p_unchanged if margin else 1.0,
                             reachable=not margin or not margin < certifiable, p_beyond=p_beyond if margin else None,
                             within=not margin or abs(diff.effect) <= margin)
    return ChangeVerdict(decision, "paired", aggregate(column, a), aggregate(column, b),
                         *(measure.in_column(column, v, n) for v in (diff.effect, diff.lo, diff.hi)),
                         diff.test.p_two_sided, p_unchanged, margin if margin else float("nan"), n, certifiable,
                         diff.differing_groups, diff.discordant, p_beyond, catches,
                         bool(margin) and decision != "changed" and abs(diff.effect) > margin)


def tolerance_change(now: float, then: float, tolerance: float) -> ChangeVerdict:
    """A pin without the reviewed run's per-direction outcomes: changed when it moved beyond its tolerance."""
    moved = not (math.isfinite(now) and abs(now - then) <= tolerance)
    return ChangeVerdict("changed" if moved else "unchanged", f"tolerance ±{tolerance:g}, unpaired", now, then,
                         now - then)
