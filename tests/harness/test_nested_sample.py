"""The CI subset's grader sample lies inside the full run's (harness.sampling.nested_subset): every designated pair the
subset's grader judges, command 1 judged already, so the README's gate after command 1 judges nothing new."""
from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.settings import Settings
from harness.profile import load_profile
from harness.session import Evaluation

SPLITS = ("test", "confirmation")


@pytest.fixture(scope="module")
def runs() -> tuple[Evaluation, Evaluation]:
    profile = load_profile("embedded")
    full = Evaluation(Settings(splits=SPLITS), profile, contact=False)
    subset = Evaluation(Settings(splits=SPLITS, subset_pairs=24, grader_sample=4), profile, contact=False)
    return full, subset


@pytest.mark.parametrize("split", SPLITS)
def test_the_subsets_grader_sample_is_the_first_pairs_of_the_full_runs(runs, split: str) -> None:
    full, subset = runs
    drawn, command_1 = subset.sample(split, "grader_pairs"), set(full.sample(split, "grader_pairs"))
    assert len(drawn) == 4 and set(drawn) <= command_1, (drawn, split)
    pairs = subset.study.split(split)["pair_id"].nunique()
    assert 24 <= pairs <= 30  # still about --subset-pairs: the sampled groups come first, the seeded order fills


def test_without_a_grader_cap_the_subset_is_drawn_as_before(tmp_path: Path) -> None:
    plain = Evaluation(Settings(splits=SPLITS, subset_pairs=24, cache_dir=tmp_path / "c"), load_profile("embedded"),
                       contact=False)
    assert plain.nested == {}
    from fixtures.study import build_study

    assert plain.study.subset == build_study(subset_pairs=24).subset
