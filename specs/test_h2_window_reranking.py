"""H2: bounded top-20 text reranking improves both preference and position (SPEC §6, paper §V-B).

Generated for every declared window ranker against its ``compare_to`` ranker on the same
directions: strict preference (Δ strict interval, in points) and, where the window was
fully scored, preferred-passage MRR. A claim holds only when its whole interval lies
above zero and the effect reaches the sample's minimum detectable effect.
"""
from __future__ import annotations

from harness.claims import check_claim, comparison_result, h2_claims


def test_h2(evaluation, split, h2_claim, report) -> None:
    ranker, versus, measure = h2_claims(evaluation.profile)[h2_claim]
    result = comparison_result(evaluation, split, h2_claim, "H2", ranker, versus, measure, ">")
    check_claim(evaluation.profile, report, split, result, subset=evaluation.is_subset)
