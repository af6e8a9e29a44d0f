"""Claims about trained rankers decided again after their training data carried floating-point noise
(docs/statistics.md#perturbation).

A trained ranker's pins are exact because its inputs are bit-identical on every machine; its verdicts
must not hinge on that. Every ranker trained with seeds (LambdaMART: E0, N=8, any declared count) is
retrained, seed by seed, on Train and development pools whose route scores moved by one part in 10^7
(``fixtures.perturbation``), ranks the split's own pool, and each claim of a family that involves such a
ranker is decided again with its whole family, exactly as ``harness.claims`` decides it. The published
verdict of such a claim is decisive only where both decide it the same way (``reports.hypotheses.robust_to_noise``).
"""
from __future__ import annotations

from typing import Any

import pandas as pd

from fixtures.perturbation import RELATIVE_NOISE
from harness.claims import ClaimBook
from harness.memo import per_instance
from harness.session import Evaluation
from rankers.declarations import ALL
from reports.hypotheses import ClaimDefinition, ClaimResult, robust_to_noise
from reports.outcomes import seed_average


#: What the perturbed retraining saw, in a verdict's words.
NOISE = f"route scores moved by {RELATIVE_NOISE:g} of themselves"


def trained(ev: Evaluation, name: str) -> bool:
    """A ranker trained with seeds, whose training the perturbation repeats."""
    return bool(ev.seeds(name))


def involves_training(ev: Evaluation, d: ClaimDefinition) -> bool:
    """A comparison claim one of whose rankers is trained."""
    return d.kind == "comparison" and any(trained(ev, n) for n in (d.ranker, d.versus) if n)


class PerturbedEvaluation:
    """The session as the claims read it, with every trained ranker's outcomes from its perturbed retraining
    (everything else is the session's own: the same pools, directions, samples and other rankers)."""

    outcomes_on = Evaluation.outcomes_on

    def __init__(self, ev: Evaluation) -> None:
        self.ev = ev

    def __getattr__(self, name: str) -> Any:
        return getattr(self.ev, name)

    @per_instance
    def seed_outcomes(self, split: str, name: str) -> dict[int, pd.DataFrame]:
        if not trained(self.ev, name):
            return self.ev.seed_outcomes(split, name)
        return {seed: self._perturbed(split, name, seed) for seed in self.ev.seeds(name)}

    def outcomes(self, split: str, name: str) -> pd.DataFrame:
        if not trained(self.ev, name):
            return self.ev.outcomes(split, name)
        return self.seed_outcomes(split, name)[self.ev.settings.seed]

    def averaged_outcomes(self, split: str, name: str) -> pd.DataFrame:
        if len(self.ev.seeds(name)) > 1:
            return seed_average(list(self.seed_outcomes(split, name).values()))
        return self.outcomes(split, name)

    def _perturbed(self, split: str, name: str, seed: int) -> pd.DataFrame:
        """Outcomes of the model of ``seed`` retrained on the perturbed pools (ranking and outcomes memoized like any)."""
        ev, decl = self.ev, self.ev.decl(name)

        def rank():
            with ev.stage(split, f"rank_{name}_seed{seed}_perturbed"):
                ranking = decl.ranker_kind.rank_seed(decl, ev.context, split, seed, perturbed=True)
            return ranking if decl.population == ALL else ev.restrict(ranking, ev.sample(split, decl.population))
        key = {**ev.ranking_key(split, name), "seed": seed, "perturbation": RELATIVE_NOISE}
        return ev.outcomes_of(split, name, key, lambda: ev.memo.get("ranking", key, rank))


def perturbed_evaluation(ev: Evaluation) -> PerturbedEvaluation:
    """The session's one perturbed view, so its outcomes are read and computed once for every spec."""
    return ev.shared(("perturbed-evaluation",), lambda: PerturbedEvaluation(ev))


def perturbed_book(ev: Evaluation, book: ClaimBook) -> ClaimBook:
    """The session's claims (``book``) decided on the perturbed outcomes (one book per session, like the claim
    book)."""
    return ev.shared(("perturbed-claim-book",), lambda: ClaimBook(perturbed_evaluation(ev), book.selected))


def published_result(ev: Evaluation, book: ClaimBook, split: str, name: str) -> ClaimResult:
    """The claim's verdict as published: a claim about a trained ranker is decisive only where the perturbed
    retraining decides it the same way; any other claim is the claim book's."""
    exact = book.result(split, name)
    if not involves_training(ev, book.definitions[name]):
        return exact
    return robust_to_noise(exact, perturbed_book(ev, book).result(split, name), NOISE)
