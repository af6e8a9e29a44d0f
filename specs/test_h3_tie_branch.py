"""H3 and the tie-branch analysis (docs/protocol.md#ties, docs/statistics.md#h3; paper §VI), Table III and cost.

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
from harness.claims import (claim_book, designated_twins, expected_grade_counts, h3_claims, tie_branch_frame,
                            tie_twins)
from harness.checks import check_claim
from reports.cost import replay_rows, stage_cost
from reports.outcomes import direction_outcomes
from reports.pairs import given_pair_paired
from reports.outputs import stash_frame
from reports.record import Artifact
from reports.tables import NEVIR_PAIRED_COLUMNS, judgments_table, pair_only_outcomes, pair_only_summary, table3
from reports.tie_branch import expected_grade_rows, tie_branch_table


def test_tie_branch_table(evaluation, split, window_ranker, report) -> None:
    per = tie_branch_frame(evaluation, split, window_ranker)
    decl = evaluation.decl(window_ranker)
    rows = tie_branch_table(per, window_ranker, decl.max_score)
    report.artifact(split, Artifact("branches", stash_frame(
        evaluation.settings.cache_dir, f"branches-{window_ranker}", per[["qid", "branch"]]), ranker=window_ranker))
    for i, row in enumerate(rows):
        report.add("tie_branch", split, row, order=decl.order * 10 + i)
    assert sum(r["directions"] for r in rows) == len(per)
    assert sum(r["non_successes"] for r in rows) == int((~per["strict"]).sum())


def test_h3_equal_grade_branch_concentrates_failures(evaluation, split, graded_ranker, report, request) -> None:
    name = next(n for n, r in h3_claims(evaluation.profile).items() if r == graded_ranker)
    result = claim_book(evaluation, request.session.items).result(split, name)
    check_claim(evaluation.profile, report, split, result, subset=evaluation.is_subset,
                gate=evaluation.settings.gate_expectations)


def test_table3_pair_only_vs_window(evaluation, split, window_ranker, report) -> None:
    """L1 (designated pair only; ties and unavailable fail) vs L2 (the ranker's window rule), from shared scores
    read by the ranker's own grade rule (an expected-grade ranker's L1 uses E[g], not the argmax grade)."""
    directions = evaluation.directions_for(split, window_ranker)
    q = eligible_directions(directions)
    scores = evaluation.window_scores(split, window_ranker, "pair")
    pos = pd.Series([scores.get((a, b), float("nan")) for a, b in zip(q["qid"], q["preferred_pid"])], index=q["qid"])
    neg = pd.Series([scores.get((a, b), float("nan")) for a, b in zip(q["qid"], q["counterpart_pid"])], index=q["qid"])
    outcomes = pair_only_outcomes(directions, pos, neg)
    l1 = pair_only_summary(outcomes, window_ranker)
    l2 = evaluation.row(split, window_ranker)
    row = table3([l1], [{**l2, "scorer": window_ranker}]).iloc[0].to_dict()
    report.add("table3", split, row, order=evaluation.decl(window_ranker).order)
    paired = given_pair_paired(outcomes, directions, seed=evaluation.settings.seed)
    report.add("nevir_paired", split, {c: ({"scorer": window_ranker} | paired)[c] for c in NEVIR_PAIRED_COLUMNS},
               order=evaluation.decl(window_ranker).order)
    assert paired["paired"] <= paired["pairs"] and paired["paired_pct"] <= paired["paired_random_pct"]
    assert row["n"] == l2["n"]
    assert row["l1_strict"] + row["l1_ties"] + row["l1_unavailable"] <= row["n"]
    if not evaluation.decl(window_ranker).ranker_kind.pointwise:
        return  # a listwise or pairwise judgment of the pair alone is not its judgment within the window
    # L1 reads the very scores L2's rule reads: where the window scored both designated passages, equal values.
    per = tie_branch_frame(evaluation, split, window_ranker).set_index("qid")
    scored = per.index[per["branch"] != "outside_window_or_fallback"]
    assert np.array_equal(pos.loc[scored].to_numpy(), per.loc[scored, "s_pos"].to_numpy(), equal_nan=True)
    assert np.array_equal(neg.loc[scored].to_numpy(), per.loc[scored, "s_neg"].to_numpy(), equal_nan=True)


def test_cost_and_replays(evaluation, split, window_ranker, report) -> None:
    decl = evaluation.decl(window_ranker)
    stages = ("pair",) if decl.designated_only else ("window", "pair")
    for stage in stages:
        scored = evaluation.text_scores(split, window_ranker, stage)
        label = "pair_only" if stage == "pair" else stage
        report.add("cost", split, stage_cost(f"{window_ranker}_{label}", scored.frame, scored.calls),
                   order=decl.order)
        # Every judgment with what its scorer stored (probabilities, margin, reason), for judgments.csv.
        judgments = judgments_table(scored.frame, window_ranker, stage, decl.ranker_kind.read(decl, scored),
                                    bounded=decl.max_score is not None)
        report.artifact(split, Artifact("judgments", stash_frame(
            evaluation.settings.cache_dir, f"judgments-{window_ranker}-{stage}", judgments), window_ranker, stage))
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


def test_expected_grade_on_argmax_ties(evaluation, split, tie_twin, report, request) -> None:
    """Beyond the paper: on the directions the argmax grader leaves to its tie-breaker (equal grades), does the
    expected grade E[g] — read from the same judgments — decide more of them correctly than the tie-break?"""
    expected, argmax = tie_twins(evaluation.profile)[tie_twin]
    per, counts = expected_grade_counts(evaluation, split, expected, argmax)
    mine = evaluation.outcomes(split, expected)
    rows = expected_grade_rows(counts, expected, len(per), int((~mine["strict"].astype(bool)).sum()))
    for i, row in enumerate(rows):
        report.add("tie_branch", split, row, order=evaluation.decl(expected).order * 10 + 5 + i)
    assert sum(r["directions"] for r in rows) == counts["argmax_ties"]
    result = claim_book(evaluation, request.session.items).result(split, tie_twin)
    check_claim(evaluation.profile, report, split, result, subset=evaluation.is_subset,
                gate=evaluation.settings.gate_expectations)


def test_designated_mode_against_the_window(evaluation, split, designated_twin, report) -> None:
    """Designated mode decides every direction both modes scored as the window does, except where the window fell
    back for another passage's unavailable score (docs/protocol.md#designated-mode): those are counted, never hidden."""
    designated, window = designated_twins(evaluation.profile)[designated_twin]
    d = evaluation.outcomes(split, designated).set_index("qid")
    w = evaluation.outcomes(split, window).set_index("qid")
    common = w.index.intersection(d.index)
    differ = common[(d.loc[common, "strict"].to_numpy() != w.loc[common, "strict"].to_numpy())
                    | (d.loc[common, "tie"].to_numpy() != w.loc[common, "tie"].to_numpy())]
    window_only_fallback = common[w.loc[common, "fallback"].to_numpy(dtype=bool)
                                  & ~d.loc[common, "fallback"].to_numpy(dtype=bool)]
    unexplained = differ.difference(window_only_fallback)
    report.entry(split, f"designated_vs_window:{designated_twin}", {
        "common_directions": int(len(common)), "window_fallback": int(w.loc[common, "fallback"].sum()),
        "designated_fallback": int(d.loc[common, "fallback"].sum()),
        "window_only_fallback": int(len(window_only_fallback)), "decided_differently": int(len(differ)),
        "unexplained": int(len(unexplained))})
    assert len(unexplained) == 0, (f"{designated} and {window} disagree on {len(unexplained)} directions the window "
                                   f"did not fall back on, e.g. {list(unexplained[:3])}")
