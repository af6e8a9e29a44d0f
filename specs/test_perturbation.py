"""Trained rankers' verdicts do not hinge on floating-point noise (docs/statistics.md#perturbation).

Every ranker trained with seeds is retrained, seed by seed, on Train and development pools whose route
scores moved by one part in 10^7, as another machine's kernels could have moved them. Each claim about
such a ranker is decided again with its family on those models, and its published verdict is decisive
only where both decide it the same way. ``perturbation.csv`` records claims (verdict, effect, adjusted p
before and after, the published verdict; the single-seed protocol's verdict beside, reported, never
asserted) and the rankers' measures before and after.
"""
from __future__ import annotations

import pytest

from fixtures.code import code_identity
from fixtures.perturbation import RELATIVE_NOISE, noise_check
from fixtures.routes import ROUTES
from harness.claims import claim_book
from harness.perturbation import perturbed_book, perturbed_evaluation, published_result, trained

#: The measures of a trained ranker recorded before and after.
MEASURES = ("strict", "ties", "mrr")


def _row(subject: str, measure: str, before, after) -> dict:
    numeric = isinstance(before, (int, float)) and isinstance(after, (int, float))
    return {"subject": subject, "measure": measure, "unperturbed": before, "perturbed": after,
            "change": float(after) - float(before) if numeric else ("same" if before == after else "changed"),
            "relative_noise": RELATIVE_NOISE}


def test_trained_verdict_is_decisive_only_where_noise_agrees(evaluation, split, trained_comparison, report,
                                                              request) -> None:
    """The published verdict (``claims.csv``) holds or fails only where the exact inputs and the perturbed retraining
    both decide it so; a verdict the noise changes is published inconclusive, with both in its reason."""
    items = request.session.items
    book, noisy_book = claim_book(evaluation, items), perturbed_book(evaluation, items)
    exact, noisy = book.result(split, trained_comparison), noisy_book.result(split, trained_comparison)
    published = published_result(evaluation, items, split, trained_comparison)
    rows = [("status", exact.status, noisy.status), ("effect", exact.effect, noisy.effect),
            ("p_adjusted", exact.p_adjusted, noisy.p_adjusted), ("published status", exact.status, published.status)]
    single, single_after = book.single_seed_result(split, trained_comparison), \
        noisy_book.single_seed_result(split, trained_comparison)
    if single is not None:
        seed = evaluation.settings.seed
        rows += [(f"status@seed{seed}", single.status, single_after.status),
                 (f"effect@seed{seed}", single.effect, single_after.effect)]
    for measure, a, b in rows:
        report.add("perturbation", split, _row(trained_comparison, measure, a, b))
    if published.status != "inconclusive":
        assert exact.status == noisy.status == published.status, published.summary()
    assert ("hinges on floating-point noise" in published.reason) == (exact.status != noisy.status), published.reason


@pytest.mark.parametrize("pool_split", ["train", "development"])
def test_training_pools_carry_the_stated_noise(evaluation, pool_split: str) -> None:
    """The noise the trained rankers are retrained on is real and bounded on the study's own training pools: every
    present route score moved, by at most its stated share; membership and presence unchanged (once per pool,
    whatever split or ranker reads it)."""
    if not any(trained(evaluation, d.name) for d in evaluation.profile.ordered()):
        pytest.skip("no declared ranker is trained with seeds: nothing is retrained on these pools")
    if pool_split not in evaluation.study.splits:
        pytest.skip(f"dataset {evaluation.study.name!r} has no {pool_split} split: nothing is trained on it")
    seed = evaluation.settings.seed
    # Measured once per pool content, seed and noise code (docs/protocol.md#caches): a warm run reads the numbers.
    check = evaluation.memo.get("pool-noise", {"pool": evaluation.pool_digest(pool_split), "seed": seed,
                                               **code_identity(noise_check.__module__)},
                                lambda: noise_check(evaluation.pool(pool_split), seed))
    assert check.same_members and set(check.routes) == set(ROUTES)
    for route, (presence_kept, largest, moved) in check.routes.items():
        assert presence_kept and 0 < largest <= RELATIVE_NOISE * (1 + 1e-6) and moved > 0.99, (route, largest, moved)


def test_trained_ranker_is_retrained_on_noisy_routes(evaluation, split, trained_ranker, report) -> None:
    """What the noise does to the ranker's measures is recorded (seed 13's model, and the seed mean)."""
    noisy = perturbed_evaluation(evaluation)
    directions = evaluation.directions_for(split, trained_ranker)
    seeds = evaluation.seeds(trained_ranker)
    views = {f"@seed{evaluation.settings.seed}": (evaluation.outcomes, noisy.outcomes)}
    if len(seeds) > 1:
        views[f" mean of {len(seeds)} seeds"] = (evaluation.averaged_outcomes, noisy.averaged_outcomes)
    for suffix, (plain, perturbed) in views.items():
        a = evaluation.summary(plain(split, trained_ranker), directions)
        b = evaluation.summary(perturbed(split, trained_ranker), directions)
        for measure in MEASURES:
            report.add("perturbation", split, _row(trained_ranker, measure + suffix, float(a[measure]),
                                                   float(b[measure])))
