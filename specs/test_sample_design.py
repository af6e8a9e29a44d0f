"""The sample designs on the real outcomes: a declared sample's rate estimates the population's (docs/statistics.md#samples).

The statistics' own calibration (simulated data, the decision code's error rates) is a unit test:
tests/reports/test_calibration.py.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from fixtures.samples import UNITS, group_sample, groups_for, ratio_bias


#: Redraws of each declared sample: ~0.4 s each on Test; the mean rate's simulation SE is about 0.2 points.
REDRAWS = 100


def show(capsys, line: str) -> None:
    """A number on the terminal, past pytest's capture (so CI logs keep it)."""
    with capsys.disabled():
        print(f"\nsample design: {line}")


def test_samples_estimate_the_population_rate(evaluation, split, capsys) -> None:
    """Every sample an enabled ranker runs on (whole groups or single directions), redrawn with 100 seeds (under 1 s per split) on the real population and the session's fusion
    outcomes: the mean sample strict rate equals the population's, plus the ratio estimator's first-order bias,
    within 3 simulation SEs (docs/statistics.md#samples)."""
    strict = evaluation.outcomes(split, "fusion").set_index("qid")["strict"].astype(float)
    index, values = pd.Index(strict.index), strict.to_numpy()
    population = float(values.mean())
    used = {decl.population for decl in evaluation.profile.rankers.values()}
    for name in (n for n in evaluation.profile.samples if n in used):  # a sample no enabled ranker runs on is no design
        q, size = evaluation.sample_units(split, name), evaluation.sample_size(name, split)
        if not size or size >= len(q):
            continue
        rates = np.array([values[index.get_indexer(group_sample(q, size, seed))].mean() for seed in range(REDRAWS)])
        se, bias = rates.std(ddof=1) / math.sqrt(len(rates)), ratio_bias(q, strict, size)
        show(capsys, f"{split} sample {name!r} ({groups_for(q, size)} {UNITS[evaluation.design(name)]} of {q['group'].nunique()}): mean "
                     f"rate over {REDRAWS} seeds {100 * rates.mean():.2f}% vs population {100 * population:.2f}% "
                     f"(ratio bias {100 * bias:+.3f} pts, simulation SE {100 * se:.2f} pts)")
        assert abs(rates.mean() - population - bias) <= 3 * se + 1e-12
