"""Table II rows (docs/protocol.md#measures, #outputs) for every declared ranker, and the files behind them.

Each declared ranker gets its row, its outcomes and (for rankers that order the full
pool) its TREC run: the part ``harness.parts.table2_row`` computes them, checking the output
contract (MRR recomputed from the run file and qrels alone equals the suite's own MRR, so anyone
can check a number with their own tools); this spec asserts over the record it wrote.
"""
from __future__ import annotations

import pandas as pd
import pytest

from fixtures.populations import eligible_directions


@pytest.mark.part("table2_row")
def test_table2_row(record, evaluation, split, ranker) -> None:
    row = record[split].row("table2", ranker)
    assert row["n"] == len(eligible_directions(evaluation.directions_for(split, ranker)))
    assert 0 <= row["strict"] + row["ties"] <= row["n"]
    if evaluation.decl(ranker).designated_only:
        assert pd.isna(row["mrr"]), "a designated-pair ranker has no full-pool position"
    else:
        assert 1 <= row["mean_rank_pos"] and 1 <= row["mean_rank_neg"]


@pytest.mark.part("gates")
def test_ranker_gates(split, gated_ranker) -> None:
    """A ranker's gates (docs/statistics.md#gates): no window ranker may silently fall back to its reference for
    more queries than the profile allows, and a ranker's own quality gates (strict_pct_min, mrr_min) hold, on every
    run, the subsets included."""


@pytest.mark.part("coverage_gate")
def test_coverage_gate(split) -> None:
    """The share of planned directions whose two designated passages the pool holds, against its gate."""


@pytest.mark.part("pairwise")
def test_pairwise_differences(split, ranked_population) -> None:
    """Paired Δ strict and Δ MRR between every two rankers evaluated on the same directions (Holm per measure).

    A ranker whose outcomes cannot be computed costs only its own rows: the others' table is
    reported, then the test fails naming each one left out and why.
    """
