"""Simulated reruns for a pin's decision rates (docs/statistics.md#tost): a true change of strict preference between
two runs of the same directions, concentrated in whole groups, beneath symmetric rerun churn of single directions or
of whole groups; and the pin's decision (``reports.changes.paired_change``) read for every rerun at once from the
decision test's own parts (``reports.group_tests.mean_test_rows``), which ``tests/reports/test_pin_margins.py``
checks against the shipped code rerun by rerun.

Two designs: the frozen Test pool's real fusion outcomes (``data/pools``; 699 source groups, a NevIR pair's two
directions mostly one right and one wrong, so a whole group's flips largely cancel) and 420 synthetic groups of 1–12
directions with independent outcomes.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from reports.group_tests import mean_test_rows
from reports.stats import ALPHA
from tests.support.frozen_ranks import Split


@dataclass(frozen=True)
class Design:
    """Directions sorted by group: ``codes`` (0..G−1, ascending), ``base``: the reviewed run's strict outcomes."""

    name: str
    codes: np.ndarray
    base: np.ndarray

    @property
    def starts(self) -> np.ndarray:
        return np.flatnonzero(np.r_[True, self.codes[1:] != self.codes[:-1]])

    @property
    def sizes(self) -> np.ndarray:
        return np.bincount(self.codes)


def real_test(study) -> Design:
    """Fusion's strict outcomes on the frozen Test pool, with their source groups."""
    split = Split(study, "test")
    codes = pd.factorize(split.directions["group"], sort=True)[0]
    order = np.argsort(codes, kind="stable")
    return Design("Test's frozen pool (fusion)", codes[order], split.strict[order].astype(bool))


def synthetic(seed: int = 13) -> Design:
    """420 groups of 1–12 directions, outcomes right with probability 0.5 independently."""
    rng = np.random.default_rng(seed)
    codes = np.repeat(np.arange(420), rng.integers(1, 13, 420))
    return Design("420 groups of 1-12 directions", codes, rng.random(len(codes)) < 0.5)


def reruns(design: Design, points: float, churn: float, unit: str, runs: int, seed: int
           ) -> tuple[np.ndarray, np.ndarray]:
    """(now, then), each (runs × directions): ``points`` of strict preference truly lost (the right directions of the
    groups with the most of them, as few groups as hold the loss), and in each run independently every other
    direction (``unit`` "directions") or every other group's directions ("groups") flipped with probability churn/2,
    so about ``churn`` of them differ between the runs by churn alone, its mean change exactly 0."""
    n = len(design.codes)
    rng = np.random.default_rng(seed)
    right = np.bincount(design.codes, weights=design.base)
    groups = np.argsort(-right + rng.random(len(right)) * 0.5, kind="stable")  # most right first, ties at random
    candidates = np.concatenate([np.flatnonzero((design.codes == g) & design.base) for g in groups[:200]])
    lost = candidates[:int(points / 100 * n + 1e-9)]
    changed = np.zeros(n, dtype=bool)
    changed[lost] = True
    truth_then = design.base.copy()
    truth_now = truth_then & ~changed
    out = []
    for truth in (truth_now, truth_then):
        draw = rng.random((runs, n if unit == "directions" else len(design.sizes))) < churn / 2
        flip = (draw if unit == "directions" else draw[:, design.codes]) & ~changed
        out.append(truth[None, :] ^ flip)
    return out[0], out[1]


def group_sums(design: Design, d: np.ndarray) -> np.ndarray:
    return np.add.reduceat(d, design.starts, axis=1)


def decisions(design: Design, now: np.ndarray, then: np.ndarray, margin: float, scale: float = 100.0
              ) -> dict[str, np.ndarray]:
    """The pin's decision on every rerun from the decision test's parts: ``changed`` when the beyond-margin tests
    (every direction its own unit) give p_beyond ≤ α, ``unchanged`` when the TOST (source groups) certifies the
    margin, else undetermined; with the p-values."""
    d = now.astype(float) - then.astype(float)
    s = margin / scale
    below = mean_test_rows(d + s, 1.0 + s)[1]
    above = mean_test_rows(d - s, 1.0 + s)[0]
    p_beyond = np.minimum(1.0, 2 * np.minimum(below, above))
    bound = (1.0 + s) * float(design.sizes.max())
    sizes = design.sizes[None, :]
    p_tost = np.maximum(mean_test_rows(group_sums(design, d) + s * sizes, bound)[0],
                        mean_test_rows(group_sums(design, d) - s * sizes, bound)[1])
    changed = p_beyond <= ALPHA
    unchanged = ~changed & (p_tost <= ALPHA)
    return {"changed": changed, "unchanged": unchanged, "undetermined": ~changed & ~unchanged,
            "p_beyond": p_beyond, "p_tost": p_tost, "delta": scale * d.mean(axis=1)}


def outcome_frame(strict: np.ndarray) -> pd.DataFrame:
    """One run's per-direction outcomes (qid and the outcome fields), as the history reads them back."""
    return pd.DataFrame({"qid": [f"q{i}" for i in range(len(strict))], "strict": strict, "rank_pos": 1,
                         "rank_neg": 2, "tie": False, "fallback": False})
