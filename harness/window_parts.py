"""The parts of a run that read a window ranker's judgments: its tie branches, pair-only scoring (Table III),
judging cost and replays, designated mode against the window, order bias, unavailable judgments and endpoints.

Each computes one table's rows for one split and one window ranker into the run's record, like every part
(``harness.parts``); the plan lists them all (``harness.planning.PARTS``).
"""
from __future__ import annotations


import numpy as np
import pandas as pd

from fixtures.code import code_digest
from fixtures.populations import eligible_directions
from harness.claims import designated_twins, tie_branch_frame
from harness.parts import NotApplicable
from harness.session import Evaluation
from rankers.scorers.cache import MAX_REPLY_CHARS, capped_replies, endpoint_summary, unavailable_causes
from reports.cost import replay_rows, stage_cost
from reports.measures import nevir_paired_row
from reports.order_bias import order_bias_row
from reports.outcomes import direction_outcomes
from reports.outputs import stash_frame
from reports.pairs import given_pair_paired
from reports.record import Artifact
from reports.record_builder import RecordBuilder
from reports.tables import judgments_table, pair_only_outcomes, pair_only_summary, table3
from reports.tie_branch import tie_branch_table


def _scopes(ev: Evaluation, ranker: str) -> tuple[str, ...]:
    return ("pair",) if ev.decl(ranker).designated_only else ("window", "pair")


def tie_branch(ev: Evaluation, rec: RecordBuilder, split: str, window_ranker: str) -> None:
    """The tie-branch analysis: where both designated passages are scored in the window, equal text scores leave
    the decision to the tie-breaker (docs/protocol.md#ties)."""
    per = tie_branch_frame(ev, split, window_ranker)
    decl = ev.decl(window_ranker)
    rows = tie_branch_table(per, window_ranker, decl.max_score)
    rec.artifact(split, Artifact("branches", stash_frame(
        ev.settings.cache_dir, f"branches-{window_ranker}", per[["qid", "branch"]]), ranker=window_ranker))
    for i, row in enumerate(rows):
        rec.add("tie_branch", split, row, order=decl.order * 10 + i)
    assert sum(r["directions"] for r in rows) == len(per)
    assert sum(r["non_successes"] for r in rows) == int((~per["strict"]).sum())


def pair_only(ev: Evaluation, rec: RecordBuilder, split: str, window_ranker: str) -> None:
    """Table III: L1 (designated pair only; ties and unavailable fail) vs L2 (the ranker's window rule), from
    shared scores read by the ranker's own grade rule, and NevIR's paired accuracy on the given pair."""
    directions = ev.directions_for(split, window_ranker)
    q = eligible_directions(directions)
    scores = ev.window_scores(split, window_ranker, "pair")
    pos = pd.Series([scores.get((a, b), float("nan")) for a, b in zip(q["qid"], q["preferred_pid"])], index=q["qid"])
    neg = pd.Series([scores.get((a, b), float("nan")) for a, b in zip(q["qid"], q["counterpart_pid"])], index=q["qid"])
    outcomes = pair_only_outcomes(directions, pos, neg)
    l2 = ev.row(split, window_ranker)
    row = table3([pair_only_summary(outcomes, window_ranker)], [{**l2, "scorer": window_ranker}]).iloc[0].to_dict()
    order = ev.decl(window_ranker).order
    rec.add("table3", split, row, order=order)
    paired = nevir_paired_row(window_ranker, given_pair_paired(outcomes, directions, seed=ev.settings.seed))
    rec.add("nevir_paired", split, paired, order=order)
    assert paired["paired"] <= paired["pairs"] and paired["paired_pct"] <= paired["paired_trec_pct"]
    assert row["n"] == l2["n"]
    if not ev.decl(window_ranker).ranker_kind.pointwise:
        return  # a listwise or pairwise judgment of the pair alone is not its judgment within the window
    # L1 reads the very scores L2's rule reads: where the window scored both designated passages, equal values.
    per = tie_branch_frame(ev, split, window_ranker).set_index("qid")
    scored = per.index[per["branch"] != "outside_window_or_fallback"]
    assert np.array_equal(pos.loc[scored].to_numpy(), per.loc[scored, "s_pos"].to_numpy(), equal_nan=True)
    assert np.array_equal(neg.loc[scored].to_numpy(), per.loc[scored, "s_neg"].to_numpy(), equal_nan=True)


def cost(ev: Evaluation, rec: RecordBuilder, split: str, window_ranker: str) -> None:
    """A window ranker's judging cost per stage, its judgments (judgments.csv) and the K-window replays."""
    decl = ev.decl(window_ranker)
    for stage in _scopes(ev, window_ranker):
        scored = ev.text_scores(split, window_ranker, stage)
        label = "pair_only" if stage == "pair" else stage
        rec.add("cost", split, stage_cost(f"{window_ranker}_{label}", scored.frame, scored.calls), order=decl.order)
        # Every judgment with what its scorer stored (probabilities, margin, reason), for judgments.csv.
        judgments = judgments_table(scored.frame, window_ranker, stage, decl.ranker_kind.read(decl, scored),
                                    bounded=decl.max_score is not None)
        rec.artifact(split, Artifact("judgments", stash_frame(
            ev.settings.cache_dir, f"judgments-{window_ranker}-{stage}", judgments), window_ranker, stage))
    if decl.designated_only:
        return  # replays reorder whole windows: they need every window score
    population = ev.directions_for(split, window_ranker)
    reference = ev.restrict(ev.ranking(split, decl.reference), ev.outcomes(split, window_ranker)["qid"]) \
        if decl.population != "all" else ev.ranking(split, decl.reference)

    def strict_of(ranking):
        out = direction_outcomes(ranking, population)
        return int(out["strict"].sum()), len(out)

    key = {"window": ev.ranking_key(split, window_ranker), "pool": ev.pool_digest(split),
           "code": code_digest("reports.cost", "reports.measures", "rankers.window")}
    rows = ev.memo.get("replays", key, lambda: replay_rows(
        reference, ev.window_scores(split, window_ranker), ev.pool(split), strict_of))
    for row in rows:
        rec.add("cost", split, {**row, "stage": f"{window_ranker}_{row['stage']}"}, order=decl.order)
    if decl.tie_breaker in (None, decl.reference):
        full = next(r for r in rows if r["stage"] == "replay_k20")
        assert full["strict"] == ev.row(split, window_ranker)["strict"], "K=20 replay must reproduce the window run"


def designated_vs_window(ev: Evaluation, rec: RecordBuilder, split: str, designated_twin: str) -> None:
    """Designated mode decides every direction both modes scored as the window does, except where the window fell
    back for another passage's unavailable score (docs/protocol.md#designated-mode): counted, never hidden."""
    designated, window = designated_twins(ev.profile)[designated_twin]
    d = ev.outcomes(split, designated).set_index("qid")
    w = ev.outcomes(split, window).set_index("qid")
    common = w.index.intersection(d.index)
    differ = common[(d.loc[common, "strict"].to_numpy() != w.loc[common, "strict"].to_numpy())
                    | (d.loc[common, "tie"].to_numpy() != w.loc[common, "tie"].to_numpy())]
    window_only_fallback = common[w.loc[common, "fallback"].to_numpy(dtype=bool)
                                  & ~d.loc[common, "fallback"].to_numpy(dtype=bool)]
    unexplained = differ.difference(window_only_fallback)
    rec.entry(split, f"designated_vs_window:{designated_twin}", {
        "common_directions": int(len(common)), "window_fallback": int(w.loc[common, "fallback"].sum()),
        "designated_fallback": int(d.loc[common, "fallback"].sum()),
        "window_only_fallback": int(len(window_only_fallback)), "decided_differently": int(len(differ)),
        "unexplained": int(len(unexplained))})
    assert len(unexplained) == 0, (f"{designated} and {window} disagree on {len(unexplained)} directions the window "
                                   f"did not fall back on, e.g. {list(unexplained[:3])}")


def order_bias(ev: Evaluation, rec: RecordBuilder, split: str, window_ranker: str) -> None:
    """Repairs and position bias of a window ranker that judges several passages at once (listwise, pairwise)."""
    decl = ev.decl(window_ranker)
    scored = {scope: ev.text_scores(split, window_ranker, scope) for scope in _scopes(ev, window_ranker)}
    if all(s.windows is None for s in scored.values()):
        raise NotApplicable(f"{window_ranker} judges each passage on its own (kind {decl.kind}): no candidate order")
    directions = eligible_directions(ev.directions_for(split, window_ranker))
    for scope, s in scored.items():
        label = "pair_only" if scope == "pair" else scope
        row = order_bias_row(window_ranker, label, s.windows, s.calls, directions)
        rec.add("order_bias", split, row, order=decl.order)
        rec.entry(split, f"order_bias:{window_ranker}:{label}", row)
        main = s.windows[s.windows["variant"] == "main"]
        assert row["windows"] == len(set(s.frame["qid"])), "every judged query has exactly one window"
        assert row["fallback_windows"] == int(main["fallback"].sum()) == s.frame.loc[s.frame["score"].isna(),
                                                                                      "qid"].nunique()


def unavailable(ev: Evaluation, rec: RecordBuilder, split: str, window_ranker: str) -> None:
    """Why judgments were unavailable, counted by cause per scope, and replies stored cut to the declared cap."""
    decl = ev.decl(window_ranker)
    cap = int(decl.options.get("max_reply_chars", MAX_REPLY_CHARS))
    for scope in _scopes(ev, window_ranker):
        scored = ev.text_scores(split, window_ranker, scope)
        # Counted in judgments (a listwise window's one list, not its 20 passage rows): docs/protocol.md#judging-cost.
        causes, capped = unavailable_causes(scored.judged), capped_replies(scored.frame)
        base = {"ranker": window_ranker, "scope": scope, "inputs": scored.n_unique}
        for i, (cause, count) in enumerate(causes.items()):
            rec.add("unavailable", split, {**base, "issue": "unavailable", "cause": cause, "count": count},
                    order=decl.order * 100 + i)
        if capped:
            rec.add("unavailable", split, {**base, "issue": "capped", "count": capped,
                                           "cause": f"over {cap:,} characters stored cut"},
                    order=decl.order * 100 + 99)
        assert sum(causes.values()) == scored.n_unavailable


def endpoints(ev: Evaluation, rec: RecordBuilder, split: str, window_ranker: str) -> None:
    """Which server endpoints made a ranker's judgments in this run, and which were taken out for not answering."""
    for scope in _scopes(ev, window_ranker):
        scored = ev.text_scores(split, window_ranker, scope)
        if scored.calls is not None:  # a judgment used twice in a window is one request
            made = scored.calls.drop_duplicates("key")
        else:
            made = scored.frame.drop_duplicates(["qid", "pid"])
        summary = endpoint_summary(made["usage"], made["cached"])
        for i, (endpoint, entry) in enumerate(summary.items()):
            rec.add("endpoints", split, {"ranker": window_ranker, "scope": scope, "endpoint": endpoint, **entry},
                    order=ev.decl(window_ranker).order * 100 + i)
        assert sum(int(e["judgments"]) for e in summary.values()) <= len(made)
