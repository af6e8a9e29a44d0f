"""Latency of the measures on Test-sized synthetic populations (2,766 directions, 700 groups, ~200 candidates)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rankers.base import Ranking, rank_by_keys
from reports.measures import summarize
from reports.outcomes import direction_outcomes
from reports.stats import paired_difference
from fixtures.populations import annotate_population

N_DIRECTIONS, N_GROUPS, POOL_SIZE = 2766, 700, 200


@pytest.fixture(scope="module")
def population() -> tuple[pd.DataFrame, Ranking]:
    """Synthetic Test-shaped study: pairs of directions, 200 candidates per query, coarse keys with many ties."""
    rng = np.random.default_rng(0)
    pairs = N_DIRECTIONS // 2
    pair_ids = np.repeat([f"P{i:04d}" for i in range(pairs)], 2)
    qids = [f"{p}_q{k}" for p, k in zip(pair_ids, np.tile([1, 2], pairs))]
    group_of_pair = np.sort(rng.integers(0, N_GROUPS, pairs))
    directions = pd.DataFrame({
        "qid": qids, "pair_id": pair_ids, "split": "test",
        "preferred_pid": np.where(np.tile([True, False], pairs), "d000", "d001"),
        "counterpart_pid": np.where(np.tile([True, False], pairs), "d001", "d000"),
        "group": np.repeat([f"G{g:03d}" for g in group_of_pair], 2), "conflict": False,
    })
    pool = pd.DataFrame({"qid": np.repeat(qids, POOL_SIZE),
                         "pid": np.tile([f"d{j:03d}" for j in range(POOL_SIZE)], N_DIRECTIONS)})
    n = len(pool)
    pool["k0"] = rng.integers(0, 2, n).astype(float)
    pool["k1"] = rng.integers(0, 5, n).astype(float)
    pool["k2"] = np.round(rng.random(n), 2)
    ranking = rank_by_keys(pool, "synthetic", fallback=frozenset(qids[:78]))
    return annotate_population(directions, pool[["qid", "pid"]]), ranking


@pytest.mark.benchmark(group="measures")
def test_bench_paired_difference(benchmark, population) -> None:
    """One paired Δ: the 2,000-resample group bootstrap and the 10,000-vector group sign-flip test."""
    directions, ranking = population
    groups = directions["group"].to_numpy()
    rng = np.random.default_rng(1)
    baseline = (rng.random(N_DIRECTIONS) < 0.52).astype(float)
    ours = np.where(rng.random(N_DIRECTIONS) < 0.3, 1.0, baseline)
    diff = benchmark(paired_difference, ours, baseline, groups, 100.0)
    assert diff.n_groups == len(np.unique(groups)) and diff.lo <= diff.effect <= diff.hi


@pytest.mark.benchmark(group="measures")
def test_bench_direction_outcomes(benchmark, population) -> None:
    directions, ranking = population
    outcomes = benchmark(direction_outcomes, ranking, directions)
    assert len(outcomes) == N_DIRECTIONS
    assert summarize(outcomes, directions)["fallback"] == 78


@pytest.mark.benchmark(group="measures")
def test_bench_summarize_with_reference(benchmark, population) -> None:
    """A full Table II row: measures, paired accuracy and the 2,000-resample Δ interval."""
    directions, ranking = population
    outcomes = direction_outcomes(ranking, directions)
    reference = outcomes.assign(strict=np.random.default_rng(2).random(len(outcomes)) < 0.5)
    reference.attrs["ranker"] = "reference"
    row = benchmark(summarize, outcomes, directions, reference)
    assert row["delta_lo"] <= row["delta_pts"] <= row["delta_hi"]
