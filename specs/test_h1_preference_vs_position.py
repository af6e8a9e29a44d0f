"""H1 and every other comparison claim the profile declares (docs/statistics.md#claims, paper §V-A).

E0 (pair-only supervision) raises strict preference over fusion yet lowers the
preferred passage's MRR; background training (N=8) recovers MRR relative to E0 while
giving back strict preference. Each claim is decided with its family by one-sided group
tests after Holm (``harness.parts.comparison``): holds, fails, or inconclusive; this spec
enforces what the profile's reviewed expectation makes of the verdict.
"""
from __future__ import annotations

import pytest

from reports.decision_intervals import row_agrees
from reports.hypotheses import STATUSES


@pytest.mark.part("comparison")
def test_declared_comparison(record, split, comparison) -> None:
    """The claim decided on seed-averaged outcomes when a ranker of it is trained with several seeds, decisive only
    where the rankers retrained on noisy route scores decide it the same way (docs/statistics.md#perturbation); the
    paper's single-seed verdict is recorded beside it (``<claim>@seed<k>``) and never asserted."""
    twins = [c for c in record[split].rows("claims")["claim"] if str(c).split("@")[0] == comparison]
    for name in dict.fromkeys([comparison, *twins]):  # the claim and its single-seed twin
        row = record[split].row("claims", name)
        assert row["status"] in STATUSES and row_agrees(row), f"{name}: {row['measured']}"


@pytest.mark.part("seed_spread")
def test_seed_spread(record, split, seeded_ranker) -> None:
    """Each measure of a seeded ranker across its training seeds, beside Table II (seeds.csv): the run's own seed is
    Table II's row; the mean is over the models its claims' seed-averaged outcomes come from."""
    for row in (r for r in record[split].rows("seeds").to_dict("records") if r["ranker"] == seeded_ranker):
        assert row["min"] <= row["single_seed"] <= row["max"], row["measure"]
