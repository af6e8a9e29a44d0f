"""Table I: planned directions, conflicts, source groups, coverage and eligibility (``docs/protocol.md#populations``).

Every requested split's report carries all four populations, because Train and
development feed the learned rankers whatever split is evaluated.
"""
from __future__ import annotations

import pytest

from fixtures.settings import SPLITS

PLANNED = {"train": 1896, "development": 76, "confirmation": 374, "test": 2766}


@pytest.mark.parametrize("population", SPLITS)
@pytest.mark.part("table1")
def test_table1_population(record, evaluation, split, population) -> None:
    row = record[split].row("table1", population)
    planned = evaluation.population(population)
    assert len(planned) == 2 * planned["pair_id"].nunique()
    if not evaluation.is_subset and evaluation.study.kind == "nevir":
        assert len(planned) == PLANNED[population], \
            f"{population}: planned {len(planned)} != the protocol's {PLANNED[population]}"
    conflicts = set(planned.loc[planned["conflict"], "qid"])
    assert not (set(planned.loc[planned["eligible"], "qid"]) & conflicts), "a structural conflict is eligible"
    assert planned["eligible"].sum() == (planned["covered"] & ~planned["conflict"]).sum()
    complete = planned[planned["eligible"]].groupby("pair_id")["qid"].size().eq(2).sum()
    assert row["complete_pairs"] == complete
    assert planned.loc[planned["complete"], "eligible"].all()


def test_cut_keeps_groups_whole(evaluation) -> None:
    d = evaluation.study.directions
    dev = d[d["split"] == "development"]
    conf = d[d["split"] == "confirmation"]
    if evaluation.study.kind == "nevir":  # a declared pair set's splits are its file's (docs/protocol.md)
        assert dev["pair_id"].nunique() == 38 and conf["pair_id"].nunique() == 187
    assert set(dev["group"]).isdisjoint(conf["group"]), "a source group crosses the development/confirmation cut"
    train_groups = set(d.loc[d["split"] == "train", "group"])
    # Train may share groups with Validation: training on Train and stopping on development is still
    # leak-free only if no development group reaches Train; report, don't hide, any overlap.
    overlap = train_groups & set(dev["group"])
    assert not overlap, f"development groups also in Train: {sorted(overlap)[:5]}"


def test_structural_conflict_of_1314_2_is_excluded(evaluation) -> None:
    test = evaluation.study.directions
    test = test[test["split"] == "test"]
    if "1314-2" not in set(test["pair_id"]):
        pytest.skip(f"a NevIR Test pair; dataset {evaluation.study.name!r} has none of that id")
    flagged = set(test.loc[test["conflict"], "qid"])
    assert flagged == {"1314-2_q1", "1314-2_q2"}
