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
from harness.perturbation import trained


@pytest.mark.part("perturbed_claim")
def test_trained_verdict_is_decisive_only_where_noise_agrees(record, split, trained_comparison) -> None:
    """The published verdict (``claims.csv``) holds or fails only where the exact inputs and the perturbed retraining
    both decide it so; a verdict the noise changes is published inconclusive, with both in its reason."""
    rows = {r["measure"]: r for r in record[split].rows("perturbation").to_dict("records") if r["subject"] == trained_comparison}
    published = rows["published status"]["unperturbed"]
    assert published == "inconclusive" or rows["status"]["unperturbed"] == rows["status"]["perturbed"] == published


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


@pytest.mark.part("perturbed_ranker")
def test_trained_ranker_is_retrained_on_noisy_routes(record, evaluation, split, trained_ranker) -> None:
    """What the noise does to the ranker's measures is recorded (seed 13's model, and the seed mean)."""
    rows = [r for r in record[split].rows("perturbation").to_dict("records") if r["subject"] == trained_ranker]
    assert {r["measure"] for r in rows} >= {f"{m}@seed{evaluation.settings.seed}" for m in ("strict", "ties", "mrr")}
