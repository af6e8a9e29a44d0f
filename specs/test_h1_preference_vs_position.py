"""H1: training interventions move preference and position apart (SPEC §6, paper §V-A).

E0 (pair-only supervision) raises strict preference over fusion yet lowers the
preferred passage's MRR; background training (N=8) recovers MRR relative to E0 while
giving back strict preference.
"""
from __future__ import annotations

import pytest

from harness.claims import check_claim


def _fmt(row: dict) -> str:
    return f"{row['ranker']}: strict {row['strict']}/{row['n']} ({row['strict_pct']:.2f}%), MRR {row['mrr']:.4f}"


CLAIMS = {
    "h1_e0_strict_gt_fusion": ("e0", "fusion", "strict_pct", ">"),
    "h1_e0_mrr_lt_fusion": ("e0", "fusion", "mrr", "<"),
    "h1_bg8_mrr_gt_e0": ("bg8", "e0", "mrr", ">"),
    "h1_bg8_strict_lt_e0": ("bg8", "e0", "strict_pct", "<"),
}


@pytest.mark.parametrize("claim", list(CLAIMS))
def test_h1(evaluation, split, claim, report) -> None:
    a, b, measure, op = CLAIMS[claim]
    ra, rb = evaluation.table2_row(split, a), evaluation.table2_row(split, b)
    holds = ra[measure] > rb[measure] if op == ">" else ra[measure] < rb[measure]
    measured = f"{_fmt(ra)}; {_fmt(rb)}"
    n_trees = {k: evaluation.learned(k).manifest.get("n_trees") for k in ("e0", "bg8")}
    report.add("manifest", split, {"key": "lambdamart_trees", "value": n_trees})
    check_claim(evaluation.profile, report, split, claim, holds, measured, subset=evaluation.is_subset)
