"""H1 and every other comparison claim the profile declares (docs/statistics.md#claims, paper §V-A).

E0 (pair-only supervision) raises strict preference over fusion yet lowers the
preferred passage's MRR; background training (N=8) recovers MRR relative to E0 while
giving back strict preference. Each claim is decided with its family by one-sided group
sign-flip tests after Holm: holds, fails, or inconclusive.
"""
from __future__ import annotations

from harness.claims import check_claim, claim_book


def test_declared_comparison(evaluation, split, comparison, report, request) -> None:
    result = claim_book(evaluation, request.session.items).result(split, comparison)
    check_claim(evaluation.profile, report, split, result, subset=evaluation.is_subset)
