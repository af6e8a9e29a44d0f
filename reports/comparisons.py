"""Paired comparisons of rankers on the same directions, by named measure (docs/statistics.md#paired-comparisons).

``compare_on`` gives one named measure's ``PairedDifference`` (Δ, interval, SE, sign-flip
test, null spread, MDE) between two rankers' outcomes, with the source group as unit;
claims, Table II's Δ columns and ``pairwise.csv`` all read it, so every number about a
difference is computed by ``reports.stats.paired_difference`` and nowhere else.
"""
from __future__ import annotations

from collections.abc import Mapping
from itertools import combinations

import numpy as np
import pandas as pd

from fixtures.populations import eligible_directions
from fixtures.settings import SEED
from reports.bootstrap import N_RESAMPLES
from reports.measures import PAIRED_MEASURES, PairedMeasure, delta_row, paired_measure
from reports.outcomes import outcome_columns
from reports.group_tests import N_PERMUTATIONS
from reports.stats import PairedDifference, holm, paired_difference
from reports.table_registry import PAIRED_DIFFERENCE_COLUMNS, TABLES

#: pairwise.csv's columns as ``pairwise_table`` computes them: a pair's ``compare`` row, then Holm-adjusted
#: p-values; the part (``harness.parts.pairwise``) adds the last, ``population``.
PAIRWISE_COLUMNS = tuple(c for c in TABLES["pairwise"].columns if c != "population")
#: The study's primary measure (strict preference): a row's groups and discordant directions are counted on it.
PRIMARY = PAIRED_MEASURES[0]


def group_labels(outcomes: pd.DataFrame, directions_annotated: pd.DataFrame, groups: str = "group") -> np.ndarray:
    """The source group of each outcome row's direction (an error for a qid outside Q_c)."""
    q = eligible_directions(directions_annotated)
    if groups not in q.columns:
        raise ValueError(f"directions frame has no bootstrap group column {groups!r}")
    where = pd.Index(q["qid"]).get_indexer(outcomes["qid"])
    if (where < 0).any():
        raise ValueError(f"outcomes hold qids outside Q_c, e.g. {outcomes['qid'][where < 0].head(3).tolist()}")
    return q[groups].to_numpy()[where]


def aligned(first: pd.DataFrame, second: pd.DataFrame, names: tuple[str, str]) -> pd.DataFrame:
    """``second``'s rows in ``first``'s qid order; an error unless both cover exactly the same directions."""
    for name, frame in zip(names, (first, second)):
        if frame["qid"].duplicated().any():
            raise ValueError(f"outcomes of {name!r} repeat qids, e.g. {frame['qid'][frame['qid'].duplicated()].head(3).tolist()}")
    where = pd.Index(second["qid"]).get_indexer(first["qid"])
    if (where < 0).any() or len(first) != len(second):
        only = sorted(set(first["qid"]) ^ set(second["qid"]))[:3]
        raise ValueError(f"{names[0]!r} and {names[1]!r} are not evaluated on the same directions "
                         f"({len(first)} vs {len(second)}; e.g. {only} in one only)")
    return second.iloc[where]


def _names(first: pd.DataFrame, second: pd.DataFrame, names: tuple[str, str] | None) -> tuple[str, str]:
    a, b = names if names is not None else (first.attrs.get("ranker"), second.attrs.get("ranker"))
    if a is None or b is None:
        raise ValueError("a comparison needs both ranker names: pass names= or outcomes from direction_outcomes")
    return a, b


def compare_on(measure: PairedMeasure | str, first: pd.DataFrame, second: pd.DataFrame,
               directions_annotated: pd.DataFrame, groups: str = "group", n_resamples: int = N_RESAMPLES,
               n_permutations: int = N_PERMUTATIONS, seed: int = SEED,
               names: tuple[str, str] | None = None) -> PairedDifference | None:
    """``first`` minus ``second`` on one measure over their common directions; None when a position measure
    meets a ranker without full-pool ranks."""
    m = paired_measure(measure) if isinstance(measure, str) else measure
    a_name, b_name = _names(first, second, names)
    a = outcome_columns(first, f"outcomes of {a_name!r}")
    b = outcome_columns(aligned(first, second, (a_name, b_name)), f"outcomes of {b_name!r}")
    if m.position and not ("rank_pos" in a and "rank_pos" in b):
        return None
    return paired_difference(m.values(a), m.values(b), group_labels(first, directions_annotated, groups), m.scale,
                             n_resamples, n_permutations, seed)


def compare(first: pd.DataFrame, second: pd.DataFrame, directions_annotated: pd.DataFrame, groups: str = "group",
            n_resamples: int = N_RESAMPLES, n_permutations: int = N_PERMUTATIONS, seed: int = SEED,
            names: tuple[str, str] | None = None) -> dict[str, object]:
    """One row of ``PAIRED_DIFFERENCE_COLUMNS``: ``first`` minus ``second`` over their common directions.

    Δ strict is in points, Δ MRR in MRR units (NaN when either ranker lacks full-pool ranks);
    both p-values are two-sided p-values of the decision test (``reports.group_tests.mean_test``).
    """
    pair = _names(first, second, names)
    row: dict[str, object] = {"first": pair[0], "second": pair[1], "n": len(first)}
    for m in PAIRED_MEASURES:
        if not m.delta_columns:
            continue
        diff = compare_on(m, first, second, directions_annotated, groups, n_resamples, n_permutations, seed, pair)
        row.update(delta_row(m, diff))
        row[m.p_column] = diff.test.p_two_sided if diff is not None else float("nan")
        if m is PRIMARY:
            row.update(n_groups=diff.n_groups, differing_groups=diff.differing_groups, discordant=diff.discordant)
    return {c: row[c] for c in PAIRED_DIFFERENCE_COLUMNS}


def pairwise_table(outcomes_by_ranker: Mapping[str, pd.DataFrame], directions_annotated: pd.DataFrame,
                   groups: str = "group", n_resamples: int = N_RESAMPLES, n_permutations: int = N_PERMUTATIONS,
                   seed: int = SEED) -> pd.DataFrame:
    """Every pair of rankers (in the given order, first before second) evaluated on identical direction sets.

    Pairs on different directions (a sampled ranker against a full-Q_c one) are left
    out. The table is one family per measure: each ``<p>_holm`` column is Holm-adjusted over
    all of its rows.
    """
    rows = [compare(outcomes_by_ranker[a], outcomes_by_ranker[b], directions_annotated, groups, n_resamples,
                    n_permutations, seed, names=(a, b))
            for a, b in combinations(outcomes_by_ranker, 2)
            if len(outcomes_by_ranker[a]) == len(outcomes_by_ranker[b])
            and set(outcomes_by_ranker[a]["qid"]) == set(outcomes_by_ranker[b]["qid"])]
    table = pd.DataFrame(rows, columns=list(PAIRED_DIFFERENCE_COLUMNS))
    for m in PAIRED_MEASURES:
        if m.p_column:
            table[f"{m.p_column}_holm"] = holm(table[m.p_column].to_numpy(dtype=float))
    return table[list(PAIRWISE_COLUMNS)]
