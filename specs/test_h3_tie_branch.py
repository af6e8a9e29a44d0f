"""H3 and the tie-branch analysis (SPEC §4, §6; paper §VI), plus Table III and cost.

The grader's equal-grade branch (both designated passages in the window with the same
grade, left to fusion) should hold a larger share of the remaining failures than of
the directions.
"""
from __future__ import annotations

import pandas as pd
import pytest

from harness.claims import check_claim
from reports.cost import replay_rows, stage_cost
from reports.measures import direction_outcomes
from fixtures.populations import eligible_directions
from reports.tables import pair_only_outcomes, pair_only_summary, table3
from reports.tie_branch import tie_branch_table, tie_branches

MAX_SCORE = {"grader": 4.0, "ce": None}
POPULATION = {"ce": "ce", "grader": "grader"}


def _scorer_param(name: str):
    return pytest.param(name, marks=[pytest.mark.llm] if name == "grader" else [], id=name)


def _branches(evaluation, split, scorer):
    population = evaluation.population_for(split, POPULATION[scorer])
    ranking = evaluation.ranking(split, scorer)
    outcomes = evaluation.outcomes(split, scorer)
    fusion = evaluation.ranking(split, "fusion")
    scores = evaluation.text_scores(split, scorer, "window").scores
    return tie_branches(eligible_directions(population), outcomes, fusion.frame, scores, ranking.fallback, k=20)


@pytest.mark.parametrize("scorer", [_scorer_param(s) for s in MAX_SCORE])
def test_tie_branch_table(evaluation, split, scorer, report) -> None:
    per = _branches(evaluation, split, scorer)
    rows = tie_branch_table(per, scorer, MAX_SCORE[scorer])
    for row in rows:
        report.add("tie_branch", split, row)
    assert sum(r["directions"] for r in rows) == len(per)
    assert sum(r["non_successes"] for r in rows) == int((~per["strict"]).sum())


@pytest.mark.llm
def test_h3_equal_grade_branch_concentrates_failures(evaluation, split, report) -> None:
    rows = {r["branch"]: r for r in tie_branch_table(_branches(evaluation, split, "grader"), "grader", 4.0)}
    eq = rows["equal_score"]
    holds = eq["non_successes_pct"] > eq["directions_pct"]
    measured = (f"equal-grade branch: {eq['directions']} directions ({eq['directions_pct']:.2f}%), "
                f"{eq['non_successes']} non-successes ({eq['non_successes_pct']:.2f}% of failures); "
                f"double-4 {eq['double_max']} ({eq['double_max_pct'] or 0:.2f}% of ties); "
                f"different-grade accuracy {rows['different_score']['accuracy_pct']:.2f}%")
    check_claim(evaluation.profile, report, split, "h3_tie_branch_concentrates_failures", holds, measured,
                subset=evaluation.is_subset)


@pytest.mark.parametrize("scorer", [_scorer_param(s) for s in MAX_SCORE])
def test_table3_pair_only_vs_window(evaluation, split, scorer, report) -> None:
    """L1 (designated pair only; ties and unavailable fail) vs L2 (window), from shared cached scores."""
    population = evaluation.population_for(split, POPULATION[scorer])
    q = eligible_directions(population)
    scores = evaluation.text_scores(split, scorer, "pair").scores
    pos = pd.Series([scores.get((a, b), float("nan")) for a, b in zip(q["qid"], q["preferred_pid"])], index=q["qid"])
    neg = pd.Series([scores.get((a, b), float("nan")) for a, b in zip(q["qid"], q["counterpart_pid"])], index=q["qid"])
    l1 = pair_only_summary(pair_only_outcomes(population, pos, neg), scorer)
    l2 = evaluation.table2_row(split, scorer)
    row = table3([l1], [{**l2, "scorer": scorer}]).iloc[0].to_dict()
    report.add("table3", split, row)
    assert row["n"] == l2["n"]
    assert row["l1_strict"] + row["l1_ties"] + row["l1_unavailable"] <= row["n"]


@pytest.mark.parametrize("scorer", [_scorer_param(s) for s in MAX_SCORE])
def test_cost_and_replays(evaluation, split, scorer, report) -> None:
    population = evaluation.population_for(split, POPULATION[scorer])
    window = evaluation.text_scores(split, scorer, "window")
    pair = evaluation.text_scores(split, scorer, "pair")
    for stage, scored in (("window", window), ("pair_only", pair)):
        report.add("cost", split, {**stage_cost(f"{scorer}_{stage}", scored.frame)})
    fusion = evaluation.ranking(split, "fusion")
    fusion = evaluation.restrict(fusion, list(population["qid"]))

    def strict_of(ranking):
        out = direction_outcomes(ranking, population)
        return int(out["strict"].sum()), len(out)

    rows = replay_rows(fusion, window.scores, evaluation.pool(split), strict_of)
    for row in rows:
        report.add("cost", split, {**row, "stage": f"{scorer}_{row['stage']}"})
    full = next(r for r in rows if r["stage"] == "replay_k20")
    assert full["strict"] == evaluation.table2_row(split, scorer)["strict"], "K=20 replay must reproduce the window run"
