"""H3 and the tie-branch analysis (SPEC §4, §6; paper §VI), Table III and cost, for every window ranker.

Where both designated passages are scored in the window, equal text scores leave the
decision to the tie-breaker: for a ranker on a bounded grade scale (the LLM grader's
0–4), H3 says this equal-grade branch holds a larger share of the remaining failures
than of the directions.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from fixtures.code import code_digest
from fixtures.populations import eligible_directions
from harness.claims import check_claim, designated_twins, h3_claims, tie_branch_result, tie_twins
from rankers.window import WINDOW_K
from reports.claims import claim
from reports.cost import replay_rows, stage_cost
from reports.measures import direction_outcomes
from reports.outputs import stash_frame
from reports.stats import compare
from reports.tables import pair_only_outcomes, pair_only_summary, table3
from reports.tie_branch import expected_grade_splits, tie_branch_table, tie_branches


def _branches(evaluation, split: str, name: str) -> pd.DataFrame:
    decl = evaluation.decl(name)
    reference = evaluation.ranking(split, decl.reference)
    ranking_fallback = frozenset(evaluation.outcomes(split, name).query("fallback")["qid"])
    return tie_branches(eligible_directions(evaluation.directions_for(split, name)), evaluation.outcomes(split, name),
                        reference.frame, evaluation.window_scores(split, name), ranking_fallback, k=WINDOW_K)


def test_tie_branch_table(evaluation, split, window_ranker, report) -> None:
    per = _branches(evaluation, split, window_ranker)
    decl = evaluation.decl(window_ranker)
    rows = tie_branch_table(per, window_ranker, decl.max_score)
    report.add("artifacts", split, {"artifact": f"branches:{window_ranker}", "path": str(stash_frame(
        evaluation.settings.cache_dir, f"branches-{window_ranker}", per[["qid", "branch"]]))})
    for i, row in enumerate(rows):
        report.add("tie_branch", split, row, order=decl.order * 10 + i)
    assert sum(r["directions"] for r in rows) == len(per)
    assert sum(r["non_successes"] for r in rows) == int((~per["strict"]).sum())


def test_h3_equal_grade_branch_concentrates_failures(evaluation, split, graded_ranker, report) -> None:
    per = _branches(evaluation, split, graded_ranker)
    q = eligible_directions(evaluation.directions_for(split, graded_ranker)).set_index("qid")
    name = next(n for n, r in h3_claims(evaluation.profile).items() if r == graded_ranker)
    result = tie_branch_result(name, per, len(per), q.loc[per["qid"], "group"].to_numpy(), evaluation.settings.seed,
                               graded_ranker)
    check_claim(evaluation.profile, report, split, result, subset=evaluation.is_subset)


def test_table3_pair_only_vs_window(evaluation, split, window_ranker, report) -> None:
    """L1 (designated pair only; ties and unavailable fail) vs L2 (the ranker's window rule), from shared scores."""
    directions = evaluation.directions_for(split, window_ranker)
    q = eligible_directions(directions)
    scores = evaluation.text_scores(split, window_ranker, "pair").scores
    pos = pd.Series([scores.get((a, b), float("nan")) for a, b in zip(q["qid"], q["preferred_pid"])], index=q["qid"])
    neg = pd.Series([scores.get((a, b), float("nan")) for a, b in zip(q["qid"], q["counterpart_pid"])], index=q["qid"])
    l1 = pair_only_summary(pair_only_outcomes(directions, pos, neg), window_ranker)
    l2 = evaluation.row(split, window_ranker)
    row = table3([l1], [{**l2, "scorer": window_ranker}]).iloc[0].to_dict()
    report.add("table3", split, row, order=evaluation.decl(window_ranker).order)
    assert row["n"] == l2["n"]
    assert row["l1_strict"] + row["l1_ties"] + row["l1_unavailable"] <= row["n"]


def test_cost_and_replays(evaluation, split, window_ranker, report) -> None:
    decl = evaluation.decl(window_ranker)
    stages = ("pair",) if decl.designated_only else ("window", "pair")
    for stage in stages:
        scored = evaluation.text_scores(split, window_ranker, stage)
        label = "pair_only" if stage == "pair" else stage
        report.add("cost", split, stage_cost(f"{window_ranker}_{label}", scored.frame), order=decl.order)
    if decl.designated_only:
        return  # replays reorder whole windows: they need every window score
    population = evaluation.directions_for(split, window_ranker)
    reference = evaluation.restrict(evaluation.ranking(split, decl.reference), evaluation.outcomes(split, window_ranker)["qid"]) \
        if decl.population != "all" else evaluation.ranking(split, decl.reference)

    def strict_of(ranking):
        out = direction_outcomes(ranking, population)
        return int(out["strict"].sum()), len(out)

    key = {"window": evaluation.ranking_key(split, window_ranker), "pool": evaluation.pool_digest(split),
           "code": code_digest("reports.cost", "reports.measures", "rankers.window")}
    rows = evaluation.memo.get("replays", key, lambda: replay_rows(
        reference, evaluation.window_scores(split, window_ranker), evaluation.pool(split), strict_of))
    for row in rows:
        report.add("cost", split, {**row, "stage": f"{window_ranker}_{row['stage']}"}, order=decl.order)
    if decl.tie_breaker in (None, decl.reference):
        full = next(r for r in rows if r["stage"] == "replay_k20")
        assert full["strict"] == evaluation.row(split, window_ranker)["strict"], \
            "K=20 replay must reproduce the window run"


def test_expected_grade_on_argmax_ties(evaluation, split, tie_twin, report) -> None:
    """Beyond the paper (issue 13): on the directions the argmax grader leaves to fusion (equal grades), does the
    expected grade E[g] — read from the same judgments — decide more of them correctly than fusion's tie-break?"""
    expected, argmax = tie_twins(evaluation.profile)[tie_twin]
    per = _branches(evaluation, split, argmax)
    q = eligible_directions(evaluation.directions_for(split, argmax)).set_index("qid").loc[per["qid"]]
    scores = evaluation.window_scores(split, expected)
    e_pos = np.array([scores.get((a, b), np.nan) for a, b in zip(per["qid"], q["preferred_pid"])])
    e_neg = np.array([scores.get((a, b), np.nan) for a, b in zip(per["qid"], q["counterpart_pid"])])
    counts = expected_grade_splits(per, e_pos, e_neg)
    order = evaluation.decl(expected).order * 10
    ties = max(counts["argmax_ties"], 1)
    for i, (branch, n, right, fusion_right) in enumerate((
            ("argmax_tie_split_by_expected", counts["split"], counts["split_right"], counts["fusion_right_on_split"]),
            ("argmax_tie_still_tied", counts["still_tied"], counts["fusion_right_on_still_tied"],
             counts["fusion_right_on_still_tied"]))):
        report.add("tie_branch", split, {
            "scorer": expected, "branch": branch, "directions": n, "directions_pct": 100.0 * n / ties,
            "non_successes": n - right, "accuracy_pct": 100.0 * right / n if n else float("nan"),
            "fusion_accuracy_pct": 100.0 * fusion_right / n if n else float("nan")}, order=order + 5 + i)
    tied = per.loc[per["branch"] == "equal_score", "qid"]
    mine = evaluation.outcomes_on(split, expected, tied)
    twin = evaluation.outcomes_on(split, argmax, tied)
    if len(tied) == 0:
        result = claim(tie_twin, "H3x", np.nan, np.nan, np.nan, ">", np.nan, 0,
                       measured=f"{argmax}: no equal-grade direction on this sample")
    else:
        row = compare(mine, twin, evaluation.directions_for(split, argmax), seed=evaluation.settings.seed,
                      names=(expected, argmax))
        result = claim(tie_twin, "H3x", row["delta_pts"], row["delta_lo"], row["delta_hi"], ">", row["mde_pts"],
                       len(tied), p_value=row["p_strict"],
                       measured=(f"{len(tied)} equal-grade directions of {argmax}: expected grade splits "
                                 f"{counts['split']}, right on {counts['split_right']} (fusion's tie-break right on "
                                 f"{counts['fusion_right_on_split']} of them); strict {int(mine['strict'].sum())} vs "
                                 f"{int(twin['strict'].sum())}; Δ {row['delta_pts']:+.2f} pts "
                                 f"[{row['delta_lo']:+.2f}, {row['delta_hi']:+.2f}], MDE {row['mde_pts']:.2f}"))
    check_claim(evaluation.profile, report, split, result, subset=evaluation.is_subset)


def test_designated_strict_equals_window_strict(evaluation, split, designated_twin, report) -> None:
    """Strict preference from the designated pair's scores equals the full window's on every direction both
    scored (except where the window fell back for another passage's unavailable score)."""
    designated, window = designated_twins(evaluation.profile)[designated_twin]
    d = evaluation.outcomes(split, designated).set_index("qid")
    w = evaluation.outcomes(split, window).set_index("qid")
    common = w.index.intersection(d.index)
    comparable = common[~w.loc[common, "fallback"].to_numpy(dtype=bool)]
    equal = int((d.loc[comparable, "strict"] == w.loc[comparable, "strict"]).sum())
    report.add("manifest", split, {"key": f"designated_vs_window:{designated_twin}", "value": {
        "common_directions": int(len(common)), "compared": int(len(comparable)), "strict_equal": equal}})
    assert equal == len(comparable), f"{designated} and {window} disagree on {len(comparable) - equal} directions"
