"""Table II rows (docs/protocol.md#measures, #outputs) for every declared ranker, and the files behind them.

Each declared ranker gets its row, its outcomes and (for rankers that order the full
pool) its TREC run: the part ``harness.parts.table2_row`` computes them, checking the output
contract (MRR recomputed from the run file and qrels alone equals the suite's own MRR, so anyone
can check a number with their own tools); this spec asserts over the record it wrote.
"""
from __future__ import annotations

from fixtures.populations import eligible_directions
from harness.run import settle


def test_table2_row(run, split, ranker) -> None:
    settle(run.compute("table2_row", split, ranker))
    row = run.record.row(split, "table2", ranker)
    assert row["n"] == len(eligible_directions(run.ev.directions_for(split, ranker)))
    assert 0 <= row["strict"] + row["ties"] <= row["n"]
    if run.ev.decl(ranker).designated_only:
        assert row["mrr"] is None, "a designated-pair ranker has no full-pool position"
    else:
        assert 1 <= row["mean_rank_pos"] and 1 <= row["mean_rank_neg"]


def test_ranker_gates(run, split, gated_ranker) -> None:
    """A ranker's gates (docs/statistics.md#gates): no window ranker may silently fall back to its reference for
    more queries than the profile allows, and a ranker's own quality gates (strict_pct_min, mrr_min) hold, on every
    run, the subsets included."""
    settle(run.compute("gates", split, gated_ranker))


def test_coverage_gate(run, split) -> None:
    settle(run.compute("coverage_gate", split))


def test_pairwise_differences(run, split, ranked_population) -> None:
    """Paired Δ strict and Δ MRR between every two rankers evaluated on the same directions (Holm per measure).

    A ranker whose outcomes cannot be computed costs only its own rows: the others' table is
    reported, then the test fails naming each one left out and why.
    """
    settle(run.compute("pairwise", split, ranked_population))
