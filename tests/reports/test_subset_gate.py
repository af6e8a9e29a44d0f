"""The subset gate's error rates on the CI subset's design (docs/statistics.md#subset-gate).

On 12 whole source groups of 4 directions no test valid under the weak null can decide a claim, so a subset run
under ``--gate-expectations`` fails an expectation only when the claim's group-bootstrap interval lies wholly
beyond the non-inferiority margin against it (``harness.checks.contradicts``). Simulated here with the claims' own
interval code (``reports.bootstrap.group_bootstrap``, a ratio of summed differences over directions): how often it
fails a ranker whose true mean difference is 0 (symmetric and skewed weak nulls) or positive, and how often it
catches a ranker that loses on almost every direction (a random reranker against fusion on MRR, −0.38).
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from harness.checks import contradicts
from reports.bootstrap import Ratio, group_bootstrap

GROUPS, SIZE, RUNS = 12, 4, 400
LABELS = np.repeat(np.arange(GROUPS), SIZE)
#: P(a subset of 12 groups holds no winning group) in the rare-big-wins cell (win probability 0.2).
NO_WIN = 0.8 ** GROUPS


def _cell(name: str, rng: np.random.Generator) -> np.ndarray:
    """Per-direction MRR differences of one simulated subset: each group's directions share its effect."""
    shared = {
        "random vs fusion": np.full(GROUPS, -0.38),
        "a copy": np.zeros(GROUPS),
        "symmetric null": rng.normal(0.0, 0.3, GROUPS),
        "rare big wins": np.where(rng.random(GROUPS) < 0.2, 0.8, -0.2),
        "rare big losses": np.where(rng.random(GROUPS) < 0.2, -0.8, 0.2),
        "better, spread": rng.normal(0.05, 0.3, GROUPS),
    }[name]
    noise = 0.0 if name == "a copy" else rng.normal(0.0, 0.1, GROUPS * SIZE)
    return np.clip(np.repeat(shared, SIZE) + noise, -1.0, 1.0)


def failure_rate(name: str) -> float:
    """Share of simulated subsets in which an expectation "MRR above the baseline holds" is failed by the gate."""
    rng = np.random.default_rng(sum(map(ord, name)))
    failed = 0
    for i in range(RUNS):
        d = _cell(name, rng)
        interval = group_bootstrap({"d": d, "n": np.ones_like(d)}, LABELS, {"delta": Ratio("d", "n")}, seed=i)["delta"]
        claim = SimpleNamespace(bootstrap_interval=(interval.lo, interval.hi), unit="MRR",
                                definition=SimpleNamespace(side=">"))
        failed += contradicts(claim, "holds")
    return failed / RUNS


def _se(p: float) -> float:
    return math.sqrt(max(p * (1 - p), 1e-4) / RUNS)


@pytest.mark.parametrize("cell, limit", [
    ("symmetric null", 0.025), ("rare big losses", 0.025), ("better, spread", 0.025), ("a copy", 0.0),
    # Mean zero, but in 0.8^12 = 6.9% of subsets no group wins: those 12 groups are a ranker losing 0.2 a direction
    # everywhere, which nothing computed from them can tell apart (the documented cost of a gate on 12 groups).
    ("rare big wins", NO_WIN),
])
def test_the_gate_rarely_fails_a_ranker_no_worse_than_its_baseline(cell, limit, capsys) -> None:
    rate = failure_rate(cell)
    with capsys.disabled():
        print(f"\nsubset gate: {cell}: fails {100 * rate:.1f}% of {RUNS} subsets (limit {100 * limit:.1f}%)")
    assert rate <= limit + 3 * _se(limit)


def test_the_gate_catches_a_random_reranker(capsys) -> None:
    rate = failure_rate("random vs fusion")
    with capsys.disabled():
        print(f"\nsubset gate: random vs fusion (MRR -0.38): fails {100 * rate:.1f}% of {RUNS} subsets")
    assert rate >= 0.99


def test_the_expectation_sets_the_side() -> None:
    """An expected failure of a '>' claim (its effect expected below 0) is contradicted by an interval above the
    margin, and never by one below it; MRR's margin is 0.10, a rate's 10 points."""
    def claim(lo: float, hi: float, unit: str = "MRR", side: str = ">") -> SimpleNamespace:
        return SimpleNamespace(bootstrap_interval=(lo, hi), unit=unit, definition=SimpleNamespace(side=side))

    assert contradicts(claim(0.12, 0.3), "fails") and not contradicts(claim(0.12, 0.3), "holds")
    assert not contradicts(claim(0.05, 0.3), "fails")  # inside the margin
    assert contradicts(claim(-0.3, -0.11, side="<"), "fails") and not contradicts(claim(-0.3, -0.11), "fails")
    assert contradicts(claim(-30.0, -10.5, unit="pts"), "holds") and not contradicts(claim(-30.0, -9.5, unit="pts"),
                                                                                      "holds")
