"""H2: bounded top-20 text reranking improves both preference and position (docs/statistics.md#claims, paper §V-B).

Generated for every declared window ranker against its ``compare_to`` ranker on the same
directions: strict preference (Δ strict, in points) and, where the window was fully
scored, preferred-passage MRR. A claim holds when the one-sided group sign-flip test on
its side rejects at α 0.05 after Holm within its family; its interval is reported beside.
"""
from __future__ import annotations

from harness.claims import claim_book
from harness.checks import check_claim


def test_h2(evaluation, split, h2_claim, report, request) -> None:
    result = claim_book(evaluation, request.session.items).result(split, h2_claim)
    check_claim(evaluation.profile, report, split, result, subset=evaluation.is_subset,
                gate=evaluation.settings.gate_expectations)
