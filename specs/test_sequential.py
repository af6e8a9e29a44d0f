"""Sequential samples: where each stopped, why, what it spent, and each claim's anytime-valid test there.

A ``sequential = true`` sample judges whole source groups batch by batch and stops once every
claim of its rankers is decided or its budget is spent (docs/statistics.md#sequential-samples).
This spec publishes the sample's row in ``cost.csv`` (groups, directions, judgments, tokens and
seconds spent, their share of the full split, the stopping reason) and one row per claim in
``sequential.csv``: the anytime-valid p-values and confidence sequence at the stop beside the
claim's bootstrap interval. The verdicts themselves are the claim specs' (H1, H2, H3x).
"""
from __future__ import annotations

from harness.claims import claim_book


def test_sequential_sample(evaluation, split, sequential_sample, report, request) -> None:
    run = evaluation.sequential(split, sequential_sample)
    book = claim_book(evaluation, request.session.items)
    intervals = {}
    for claim in run.tests:
        result = book.result(split, claim)
        intervals[claim] = result.bootstrap_interval
    report.add("cost", split, run.cost_row())
    for row in run.claim_rows(intervals):
        report.add("sequential", split, row)
    assert run.qids == evaluation.sample(split, sequential_sample)
    assert run.last.directions == len(run.qids) and run.stop in ("decided", "budget", "exhausted")
