"""H2: bounded top-20 text reranking improves both preference and position over fusion (SPEC §6, paper §V-B).

Parametrized over the text scorers; each claim carries its measured numbers, and the
Δ-strict interval is the 2,000-resample source-group bootstrap: the claim is an
improvement, so the whole interval must lie above zero (an interval below zero
excludes zero too, but refutes the claim).
"""
from __future__ import annotations

import pytest

from harness.claims import check_claim

SCORERS = {"ce": ("ce", "fusion"), "grader": ("grader", "fusion_sample")}


def _scorer_param(name: str):
    marks = [pytest.mark.llm] if name == "grader" else []
    return pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("scorer", [_scorer_param(s) for s in SCORERS])
@pytest.mark.parametrize("claim", ["strict_gt_fusion", "mrr_gt_fusion", "delta_ci_above_zero"])
def test_h2(evaluation, split, scorer, claim, report) -> None:
    name, reference = SCORERS[scorer]
    row = evaluation.table2_row(split, name)
    ref = evaluation.table2_row(split, reference)
    if claim == "strict_gt_fusion":
        holds = row["strict_pct"] > ref["strict_pct"]
    elif claim == "mrr_gt_fusion":
        holds = row["mrr"] > ref["mrr"]
    else:
        holds = row["delta_lo"] > 0  # an improvement whose whole interval lies above zero
    measured = (f"{name}: strict {row['strict_pct']:.2f}% MRR {row['mrr']:.4f} (n={row['n']}, fallback {row['fallback']}); "
                f"{reference}: strict {ref['strict_pct']:.2f}% MRR {ref['mrr']:.4f}; "
                f"Δ {row['delta_pts']:+.2f} pts [{row['delta_lo']:.2f}, {row['delta_hi']:.2f}]")
    check_claim(evaluation.profile, report, split, f"h2_{scorer}_{claim}", holds, measured, subset=evaluation.is_subset)


def test_ce_fallback_gate(evaluation, split, report) -> None:
    from harness.claims import check_gate

    row = evaluation.table2_row(split, "ce")
    check_gate(evaluation.profile, report, split, "ce_fallback_pct_max", 100.0 * row["fallback"] / max(row["n"], 1))
