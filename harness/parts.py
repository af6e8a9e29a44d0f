"""The parts of a run: each computes one table's rows (or manifest entries and artifacts) for one split and one
declared parameter, into the run's record (docs/architecture.md#one-run-from-evaluate-to-results).

A part reads the session (``harness.session.Evaluation``), records what it computed into a
``reports.record.RecordBuilder`` and returns the ``Check``s its verdicts imply (claims, gates, pins;
``harness.checks``), which the specs enforce. A consistency a part's numbers must keep (a row's
counts, a replay reproducing its run, MRR recomputed from the published files) is asserted where it
is computed: the part then fails with that message, and its rows stay out of nothing else.
``PARTS`` names every part and the parameter it ranges over (``harness.run.parameters``).
"""
from __future__ import annotations

import math
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from fixtures.artifacts import sha256_file
from fixtures.code import code_digest
from fixtures.environment import environment_record
from fixtures.identity import git_commit
from fixtures.perturbation import RELATIVE_NOISE
from fixtures.populations import eligible_directions
from fixtures.settings import PROJECT_ROOT
from harness.checks import Check, claim_check, full_run_verdict, gate_checks, pin_check, single_seed_row
from harness.claims import (ClaimBook, designated_twins, expected_grade_counts, h3_claims, sample_estimand,
                            seed_estimand, tie_branch_frame, tie_twins)
from harness.perturbation import perturbed_book, perturbed_evaluation, published_result
from harness.profile_terms import QUALITY_GATES
from harness.session import Evaluation
from rankers.scorers.cache import MAX_REPLY_CHARS, capped_replies, endpoint_summary, unavailable_causes
from rankers.trec import write_qrels
from rankers.trec_run import direction_coverage
from reports.comparisons import pairwise_table
from reports.cost import ranking_cost, replay_rows, stage_cost
from reports.explore_data import top_of
from reports.measures import nevir_paired_row, paired_measure
from reports.order_bias import order_bias_row
from reports.outcomes import direction_outcomes
from reports.outputs import stash_frame, stash_run
from reports.pairs import given_pair_paired
from reports.populations import table1_row
from reports.record import Artifact, RecordBuilder
from reports.tables import judgments_table, pair_only_outcomes, pair_only_summary, table3
from reports.tie_branch import expected_grade_rows, tie_branch_table
from reports.trec import mrr_from_files

Checks = tuple[Check, ...]


class NotApplicable(Exception):
    """A part that has nothing to compute for its parameter (the reason is the message); it is reported as skipped."""


@dataclass(frozen=True)
class Part:
    """One kind of part: the parameter it ranges over besides the split (None: the split alone) and how it
    computes."""

    name: str
    parameter: str | None
    compute: Callable[..., Checks | None]


# ---- Table I, Table II and the manifest -------------------------------------------------------------------------

def table1(ev: Evaluation, rec: RecordBuilder, split: str, population: str) -> None:
    """Table I's row of one population (every evaluated split's report carries all its dataset has)."""
    if population not in ev.study.splits:
        raise NotApplicable(f"dataset {ev.study.name!r} has no {population} split")
    rec.add("table1", split, {"population": population, **table1_row(ev.population(population), population)})


def table2_row(ev: Evaluation, rec: RecordBuilder, split: str, ranker: str) -> None:
    """The ranker's Table II row, its outcomes and (for rankers that order the full pool) its TREC run and cost;
    MRR recomputed from the run file and qrels alone must equal the suite's own."""
    decl = ev.decl(ranker)
    row = ev.row(split, ranker)
    rec.add("table2", split, row, order=decl.order)
    directions = ev.directions_for(split, ranker)
    rec.artifact(split, Artifact("outcomes", stash_frame(ev.settings.cache_dir, f"outcomes-{ranker}",
                                                         ev.outcomes(split, ranker)), ranker))
    if decl.population != "all":
        rec.entry(split, f"sample:{decl.population}", {
            "directions": int(row["n"]), "requested": ev.sample_size(decl.population, split),
            "seed": ev.sample_seed(decl.population),
            "of_eligible": int(ev.population(split)["eligible"].sum())})
    if decl.designated_only:
        return
    ranking = ev.ranking(split, ranker)
    if not decl.is_window:  # a window ranker's cost is its judgments' (the ``cost`` part)
        rec.add("cost", split, ranking_cost(f"{ranker}_rank", ranking), order=decl.order)
    if "coverage" in ranking.info:  # another system's run: what it ranked in the pool and what was dropped
        coverage = {"ranker": ranker, **ranking.info["coverage"],
                    **direction_coverage(ranking, eligible_directions(directions))}
        rec.add("coverage", split, coverage, order=decl.order)
        rec.entry(split, f"coverage:{ranker}", coverage)
        assert coverage["ties"] == row["ties"] and coverage["directions"] == row["n"]
    run = stash_run(ev.settings.cache_dir, ranking)
    rec.artifact(split, Artifact("run", run, ranker))
    with tempfile.TemporaryDirectory() as tmp:
        qrels = write_qrels(directions, Path(tmp) / "qrels.txt")
        # Recomputed from the files alone; remembered per (run bytes, qrels bytes), so a warm run rereads neither.
        independent = ev.memo.get("mrr-from-files", {"run": sha256_file(run), "qrels": sha256_file(qrels),
                                                     "code": code_digest("reports.trec")},
                                  lambda: mrr_from_files(run, qrels))
    assert math.isclose(independent, row["mrr"], rel_tol=1e-12), f"{ranker}: MRR {row['mrr']} vs files {independent}"


def manifest(ev: Evaluation, rec: RecordBuilder, split: str) -> None:
    """The run manifest (code, data, models, profile with the files it extends, seeds, samples, the pool snapshot)
    and the split's shared files: the annotated population, the pool, the corpus and each reference's top."""
    s, study, profile = ev.settings, ev.study, ev.profile
    pool_manifest, pool_path = ev.pool_snapshot(split)
    entries = {
        "code_commit": git_commit(PROJECT_ROOT, dirty=True) or "unknown (not a git checkout)",
        "settings": s.as_dict(),
        "scope": s.run_scope(),
        "profile": {"name": profile.name, "file": str(profile.path), "extends": [str(p) for p in profile.chain[:-1]],
                    "models": profile.models,
                    "rankers": {d.name: {"kind": d.kind, "population": d.population, "label": d.label,
                                         "compare_to": d.baseline, "reference": d.reference,
                                         "tie_breaker": d.tie_breaker, **d.options} for d in profile.ordered()},
                    "samples": {n: {"directions": ev.sample_size(n, split), "seed": ev.sample_seed(n),
                                    **({"sequential": {"batch": p.batch, "budget": p.budget.describe()}}
                                       if p.sequential else {})}
                                for n, p in profile.samples.items()}},
        "data": study.data_provenance(),
        "dataset": {**study.dataset(), **({"reference": profile.reference} if profile.reference else {})},
        "corpus_sha256": study.corpus_hashes(),
        "cut_seed": study.cut_seed,
        "subset": {k: len(v) for k, v in study.subset.items()} if study.subset else None,
        "pool": {**pool_manifest, "path": str(pool_path)},
        "environment": environment_record(),
    }
    for key, value in entries.items():
        rec.entry(split, key, value)
    rec.artifact(split, Artifact("pool", pool_path))
    corpus = study.corpus_for(split)  # passage texts for the explorer page (it embeds only those it shows)
    rec.artifact(split, Artifact("corpus", stash_frame(
        s.cache_dir, f"corpus-{split}", pd.DataFrame({"pid": list(corpus), "text": list(corpus.values())}))))
    rec.artifact(split, Artifact("population", stash_frame(s.cache_dir, f"population-{split}", ev.population(split))))
    # The pool a number came from must name the corpus it retrieved from and the models that built it.
    assert pool_manifest["corpus_hash"] == study.corpus_hashes()[study.directions.loc[
        study.directions["split"] == split, "corpus"].iloc[0]]
    assert {"dense", "sparse", "bm25"} <= set(pool_manifest["depths"])
    # The explorer page shows the top of each pool in the order the window rankers rerank (last: a reference that
    # cannot be ranked fails here without taking the files above with it).
    for reference in sorted({d.reference for d in profile.ordered() if d.is_window and d.reference}):
        top = stash_frame(s.cache_dir, f"top-{reference}-{split}", top_of(ev.ranking(split, reference)))
        rec.artifact(split, Artifact("top", top, ranker=reference))


def margins(ev: Evaluation, rec: RecordBuilder, split: str) -> None:
    """The margins that decide "unchanged" travel with the results, so a later ``--compare-to`` uses them."""
    rec.entry(split, "margins", ev.profile.margins)
    assert all(paired_measure(name).name == name and value > 0 for name, value in ev.profile.margins.items())


def pairwise(ev: Evaluation, rec: RecordBuilder, split: str, ranked_population: str) -> None:
    """Paired Δ strict and Δ MRR between every two rankers evaluated on the same directions (Holm per measure).

    A ranker whose outcomes cannot be computed costs only its own rows: the others' table is recorded, then the
    part fails naming each one left out and why."""
    names = [d.name for d in ev.profile.ordered() if d.population == ranked_population]
    outcomes, broken = {}, {}
    for name in names:
        try:
            outcomes[name] = ev.outcomes(split, name)
        except Exception as exc:  # noqa: BLE001 - reported below against the ranker, after the others' rows
            broken[name] = f"{type(exc).__name__}: {exc}"
    if outcomes:
        table = pairwise_table(outcomes, ev.directions_for(split, next(iter(outcomes))), seed=ev.settings.seed)
        for i, row in enumerate(table.to_dict("records")):
            rec.add("pairwise", split, {**row, "population": ranked_population},
                    order=ev.decl(row["first"]).order * 1e4 + i)
    assert not broken, "left out of the pairwise table: " + "; ".join(f"{n}: {e}" for n, e in broken.items())


# ---- gates and pins -----------------------------------------------------------------------------------------------

def gate_value(row: dict, key: str) -> float:
    """What a ranker's gate measures: its fallback share (% of its directions) or a Table II column."""
    if key == "fallback_pct_max":
        return 100.0 * row["fallback"] / max(row["n"], 1)
    return float(row[QUALITY_GATES[key]])


def gates(ev: Evaluation, rec: RecordBuilder, split: str, gated_ranker: str) -> Checks:
    """A ranker's gates (docs/statistics.md#gates): its fallback share and its own quality gates, on every run."""
    row = ev.row(split, gated_ranker)
    measured = [(g, gate_value(row, g.key)) for g in ev.profile.gates_for(ev.decl(gated_ranker))]
    return _recorded(rec, split, *gate_checks(ev.profile, split, measured, subject=gated_ranker))


def coverage_gate(ev: Evaluation, rec: RecordBuilder, split: str) -> Checks:
    """The share of planned directions whose two designated passages the pool holds, against its gate."""
    gate = ev.profile.gate("coverage_pct_min")
    measured = [(gate, 100.0 * ev.population(split)["covered"].mean())] if gate else []
    return _recorded(rec, split, *gate_checks(ev.profile, split, measured))


def pin(ev: Evaluation, rec: RecordBuilder, split: str, pin: object) -> Checks:
    """A pinned, reviewed number: a change beyond its margin fails the run (docs/statistics.md#pins)."""
    row, checks = pin_check(ev, pin)
    rec.add("claims", split, row)
    return checks


def _recorded(rec: RecordBuilder, split: str, rows: list[dict], checks: Checks) -> Checks:
    for row in rows:
        rec.add("claims", split, row)
    return checks


# ---- claims -------------------------------------------------------------------------------------------------------

def _claim(ev: Evaluation, rec: RecordBuilder, split: str, book: ClaimBook, name: str, estimand: str = "",
           result=None) -> Checks:
    """A claim's verdict from its family, its row recorded; the checks its reviewed expectation implies."""
    result = result if result is not None else book.result(split, name)
    estimand = "; ".join(e for e in (estimand, sample_estimand(ev, book.definitions[name])) if e)
    row, checks = claim_check(ev.profile, split, result, subset=ev.is_subset, estimand=estimand,
                              gate=ev.settings.gate_expectations, recorded=full_run_verdict(ev, split, result.name))
    rec.add("claims", split, row)
    return checks


def comparison(ev: Evaluation, rec: RecordBuilder, split: str, comparison: str, book: ClaimBook) -> Checks:
    """A declared comparison (H1 and the profile's own), decided on seed-averaged outcomes when a ranker of it is
    trained with several seeds, decisive only where the perturbed retraining decides it the same way
    (docs/statistics.md#perturbation); the single-seed verdict is recorded beside it and never asserted."""
    single = book.single_seed_result(split, comparison)
    if single is not None:
        rec.add("claims", split, single_seed_row(ev, single))
    return _claim(ev, rec, split, book, comparison, seed_estimand(ev, book.definitions[comparison]),
                  published_result(ev, book, split, comparison))


def h2(ev: Evaluation, rec: RecordBuilder, split: str, h2_claim: str, book: ClaimBook) -> Checks:
    """H2: a window ranker against its ``compare_to`` ranker on strict preference and, where scored, MRR."""
    return _claim(ev, rec, split, book, h2_claim)


def h3(ev: Evaluation, rec: RecordBuilder, split: str, graded_ranker: str, book: ClaimBook) -> Checks:
    """H3: the equal-grade branch holds a larger share of the failures than of the directions."""
    name = next(n for n, r in h3_claims(ev.profile).items() if r == graded_ranker)
    return _claim(ev, rec, split, book, name)


def tie_resolution(ev: Evaluation, rec: RecordBuilder, split: str, tie_twin: str, book: ClaimBook) -> Checks:
    """Beyond the paper: on the directions the argmax grader leaves to its tie-breaker (equal grades), does the
    expected grade E[g] — read from the same judgments — decide more of them correctly than the tie-break?"""
    expected, argmax = tie_twins(ev.profile)[tie_twin]
    per, counts = expected_grade_counts(ev, split, expected, argmax)
    mine = ev.outcomes(split, expected)
    rows = expected_grade_rows(counts, expected, len(per), int((~mine["strict"].astype(bool)).sum()))
    for i, row in enumerate(rows):
        rec.add("tie_branch", split, row, order=ev.decl(expected).order * 10 + 5 + i)
    assert sum(r["directions"] for r in rows) == counts["argmax_ties"]
    return _claim(ev, rec, split, book, tie_twin)


def seed_spread(ev: Evaluation, rec: RecordBuilder, split: str, seeded_ranker: str) -> None:
    """Each measure of a seeded ranker across its training seeds, beside Table II (seeds.csv): the run's own seed is
    Table II's row; the mean is over the models its claims' seed-averaged outcomes come from."""
    by_seed = ev.seed_outcomes(split, seeded_ranker)
    directions = ev.directions_for(split, seeded_ranker)
    rows = {seed: ev.summary(outcomes, directions, seed=ev.settings.seed, ranker=seeded_ranker)
            for seed, outcomes in by_seed.items()}
    own = ev.row(split, seeded_ranker)
    assert rows[ev.settings.seed]["strict"] == own["strict"], "the run's seed is Table II's row"
    for measure in SEED_MEASURES:
        values = np.array([float(r[measure]) for r in rows.values()])
        rec.add("seeds", split, {
            "ranker": seeded_ranker, "measure": measure, "seeds": len(values),
            "seed_values": " ".join(f"{s}:{float(r[measure]):.6g}" for s, r in rows.items()),
            "single_seed": float(own[measure]), "mean": float(values.mean()), "sd": float(values.std(ddof=1)),
            "min": float(values.min()), "max": float(values.max())}, order=ev.decl(seeded_ranker).order)


#: seeds.csv's measures: the Table II columns a training seed can move.
SEED_MEASURES = ("strict", "strict_pct", "ties", "mrr", "pref_at_1", "pref_at_10", "paired_pct")
#: The measures of a trained ranker recorded before and after the perturbation.
PERTURBED_MEASURES = ("strict", "ties", "mrr")


def _perturbation_row(subject: str, measure: str, before, after) -> dict:
    numeric = isinstance(before, (int, float)) and isinstance(after, (int, float))
    return {"subject": subject, "measure": measure, "unperturbed": before, "perturbed": after,
            "change": float(after) - float(before) if numeric else ("same" if before == after else "changed"),
            "relative_noise": RELATIVE_NOISE}


def perturbed_claim(ev: Evaluation, rec: RecordBuilder, split: str, trained_comparison: str, book: ClaimBook) -> None:
    """A claim about a trained ranker decided on the exact inputs and on the perturbed retraining: the published
    verdict holds or fails only where both decide it so; one the noise changes is published inconclusive."""
    noisy_book = perturbed_book(ev, book)
    exact, noisy = book.result(split, trained_comparison), noisy_book.result(split, trained_comparison)
    published = published_result(ev, book, split, trained_comparison)
    rows = [("status", exact.status, noisy.status), ("effect", exact.effect, noisy.effect),
            ("p_adjusted", exact.p_adjusted, noisy.p_adjusted),
            ("published status", published.status, published.status)]
    single, single_after = book.single_seed_result(split, trained_comparison), \
        noisy_book.single_seed_result(split, trained_comparison)
    if single is not None:
        seed = ev.settings.seed
        rows += [(f"status@seed{seed}", single.status, single_after.status),
                 (f"effect@seed{seed}", single.effect, single_after.effect)]
    for measure, a, b in rows:
        rec.add("perturbation", split, _perturbation_row(trained_comparison, measure, a, b))
    assert ("hinges on floating-point noise" in published.reason) == (exact.status != noisy.status), published.reason


def perturbed_ranker(ev: Evaluation, rec: RecordBuilder, split: str, trained_ranker: str) -> None:
    """What the noise does to a trained ranker's measures (the run's seed's model, and the seed mean)."""
    noisy = perturbed_evaluation(ev)
    directions = ev.directions_for(split, trained_ranker)
    seeds = ev.seeds(trained_ranker)
    views = {f"@seed{ev.settings.seed}": (ev.outcomes, noisy.outcomes)}
    if len(seeds) > 1:
        views[f" mean of {len(seeds)} seeds"] = (ev.averaged_outcomes, noisy.averaged_outcomes)
    for suffix, (plain, perturbed) in views.items():
        a = ev.summary(plain(split, trained_ranker), directions)
        b = ev.summary(perturbed(split, trained_ranker), directions)
        for measure in PERTURBED_MEASURES:
            rec.add("perturbation", split, _perturbation_row(trained_ranker, measure + suffix, float(a[measure]),
                                                             float(b[measure])))


# ---- window rankers -----------------------------------------------------------------------------------------------

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
    assert paired["paired"] <= paired["pairs"] and paired["paired_pct"] <= paired["paired_random_pct"]
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


def sequential(ev: Evaluation, rec: RecordBuilder, split: str, sequential_sample: str, book: ClaimBook) -> None:
    """Where a sequential sample stopped, why, what it spent, and each claim's anytime-valid test there."""
    run = ev.sequential(split, sequential_sample)
    intervals = {}
    for claim in run.tests:
        intervals[claim] = book.result(split, claim).bootstrap_interval
    rec.add("cost", split, run.cost_row())
    for row in run.claim_rows(intervals):
        rec.add("sequential", split, row)
    assert run.qids == ev.sample(split, sequential_sample)
    assert run.last.directions == len(run.qids) and run.stop in ("decided", "budget", "exhausted")


#: Every part of a run, in the order ``evaluate`` computes them, with the parameter each ranges over.
PARTS: tuple[Part, ...] = (
    Part("manifest", None, manifest),
    Part("margins", None, margins),
    Part("table1", "population", table1),
    Part("table2_row", "ranker", table2_row),
    Part("gates", "gated_ranker", gates),
    Part("coverage_gate", None, coverage_gate),
    Part("pairwise", "ranked_population", pairwise),
    Part("seed_spread", "seeded_ranker", seed_spread),
    Part("comparison", "comparison", comparison),
    Part("perturbed_claim", "trained_comparison", perturbed_claim),
    Part("perturbed_ranker", "trained_ranker", perturbed_ranker),
    Part("h2", "h2_claim", h2),
    Part("tie_branch", "window_ranker", tie_branch),
    Part("h3", "graded_ranker", h3),
    Part("tie_resolution", "tie_twin", tie_resolution),
    Part("pair_only", "window_ranker", pair_only),
    Part("cost", "window_ranker", cost),
    Part("designated_vs_window", "designated_twin", designated_vs_window),
    Part("order_bias", "window_ranker", order_bias),
    Part("unavailable", "window_ranker", unavailable),
    Part("endpoints", "window_ranker", endpoints),
    Part("sequential", "sequential_sample", sequential),
    Part("pin", "pin", pin),
)
#: The parts that decide claims read the session's claim book (their ``book`` argument).
WITH_BOOK = frozenset({"comparison", "perturbed_claim", "h2", "h3", "tie_resolution", "sequential"})
