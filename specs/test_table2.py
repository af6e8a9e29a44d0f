"""Table II rows (SPEC §4–5): preference and position per ranker, written through the report plugin.

Also the output contract: MRR recomputed from runs/<ranker>.trec + qrels.txt alone
equals the suite's own MRR, so anyone can check a number with their own tools.
"""
from __future__ import annotations

import math

import pytest

from reports.trec import mrr_from_files

FULL_POOL_RANKERS = ("fusion", "e0", "bg8", "ce")
SAMPLED_RANKERS = ("fusion_sample", "grader", "grader_e0")


def _row(evaluation, split, ranker, report):
    row = evaluation.table2_row(split, ranker)
    report.add("table2", split, row)
    return row


@pytest.mark.parametrize("ranker", FULL_POOL_RANKERS)
def test_table2_full_pool_ranker(evaluation, split, ranker, report) -> None:
    row = _row(evaluation, split, ranker, report)
    eligible = int(evaluation.population(split)["eligible"].sum())
    assert row["n"] == eligible
    assert 0 <= row["strict"] + row["ties"] <= row["n"]
    assert 1 <= row["mean_rank_pos"] and 1 <= row["mean_rank_neg"]
    results = evaluation.results(split)
    independent = mrr_from_files(results / "runs" / f"{ranker}.trec", results / "qrels.txt")
    assert math.isclose(independent, row["mrr"], rel_tol=1e-12), f"{ranker}: MRR {row['mrr']} vs files {independent}"


@pytest.mark.llm
@pytest.mark.parametrize("ranker", SAMPLED_RANKERS)
def test_table2_grader_sample(evaluation, split, ranker, report) -> None:
    row = _row(evaluation, split, ranker, report)
    sample = evaluation.grader_qids(split)
    assert row["n"] == len(sample)
    report.add("manifest", split, {"key": "grader_sample", "value": {
        "directions": len(sample), "seed": evaluation.settings.seed,
        "requested": evaluation.grader_sample_size(), "of_eligible": int(evaluation.population(split)["eligible"].sum())}})
    if ranker == "grader":
        assert row["fallback"] <= row["n"]


def test_coverage_gate(evaluation, split, report) -> None:
    pop = evaluation.population(split)
    coverage = 100.0 * pop["covered"].mean()
    from harness.claims import check_gate

    check_gate(evaluation.profile, report, split, "coverage_pct_min", coverage)
