"""H1 and every other comparison claim the profile declares (docs/statistics.md#claims, paper §V-A).

E0 (pair-only supervision) raises strict preference over fusion yet lowers the
preferred passage's MRR; background training (N=8) recovers MRR relative to E0 while
giving back strict preference. Each claim is decided with its family by one-sided group
tests after Holm (``harness.parts.comparison``): holds, fails, or inconclusive; this spec
enforces what the profile's reviewed expectation makes of the verdict.
"""
from __future__ import annotations

from harness.run import settle


def test_declared_comparison(run, split, comparison) -> None:
    """The claim decided on seed-averaged outcomes when a ranker of it is trained with several seeds, decisive only
    where the rankers retrained on noisy route scores decide it the same way (docs/statistics.md#perturbation); the
    paper's single-seed verdict is recorded beside it (``<claim>@seed<k>``) and never asserted."""
    settle(run.compute("comparison", split, comparison))


def test_seed_spread(run, split, seeded_ranker) -> None:
    """Each measure of a seeded ranker across its training seeds, beside Table II (seeds.csv): the run's own seed is
    Table II's row; the mean is over the models its claims' seed-averaged outcomes come from."""
    settle(run.compute("seed_spread", split, seeded_ranker))
    for row in (r for r in run.record.table_rows(split, "seeds") if r["ranker"] == seeded_ranker):
        assert row["min"] <= row["single_seed"] <= row["max"], row["measure"]
