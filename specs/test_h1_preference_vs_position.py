"""H1 and every other comparison claim the profile declares (SPEC §6, paper §V-A).

E0 (pair-only supervision) raises strict preference over fusion yet lowers the
preferred passage's MRR; background training (N=8) recovers MRR relative to E0 while
giving back strict preference. Each claim is decided by its paired source-group
interval: holds, fails, or inconclusive.
"""
from __future__ import annotations

from harness.claims import check_claim, comparison_result


def test_declared_comparison(evaluation, split, comparison, report) -> None:
    c = evaluation.profile.claims[comparison]
    result = comparison_result(evaluation, split, c.name, c.family or "declared", c.ranker, c.versus, c.measure,
                               c.direction)
    check_claim(evaluation.profile, report, split, result, subset=evaluation.is_subset)
