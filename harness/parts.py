"""The parts of a run: each computes one table's rows (or manifest entries and artifacts) for one split and one
declared parameter, into the run's record (docs/architecture.md#one-run-from-evaluate-to-results).

A part reads the session (``harness.session.Evaluation``), records what it computed into a
``reports.record.RecordBuilder`` and returns the ``Check``s its verdicts imply (claims, gates, pins;
``harness.checks``), which the specs enforce. A consistency a part's numbers must keep (a row's
counts, a replay reproducing its run, MRR recomputed from the published files) is asserted where it
is computed: the part then fails with that message, and its rows stay out of nothing else.
The plan (``harness.planning.PARTS``) names every part and the parameter it ranges over; the parts of a window
ranker are in ``harness.window_parts``.
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
from harness.claims import ClaimBook, expected_grade_counts, h3_claims, sample_estimand, seed_estimand, tie_twins
from harness.models import manifest_entry as study_models_entry
from harness.perturbation import perturbed_book, perturbed_evaluation, published_result
from harness.profile_terms import QUALITY_GATES
from harness.session import Evaluation
from rankers.trec import write_qrels
from rankers.trec_run import direction_coverage
from reports.comparisons import pairwise_table
from reports.cost import ranking_cost
from reports.explore_data import top_of
from reports.measures import paired_measure
from reports.outputs import stash_frame, stash_run
from reports.populations import table1_row
from reports.record import Artifact
from reports.record_builder import RecordBuilder
from reports.tie_branch import expected_grade_rows
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
    models = study_models_entry(ev, ranker)  # the models it trains: their folders, which one scored it, and why
    if models:
        rec.entry(split, f"model:{ranker}", models)
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

def _claim(ev: Evaluation, rec: RecordBuilder, split: str, book: ClaimBook, name: str, seeds: str = "",
           result=None) -> Checks:
    """A claim's verdict from its family, its row recorded (``seeds``: the seed average it is decided on, in the words
    every output uses); the checks its reviewed expectation implies."""
    result = result if result is not None else book.result(split, name)
    estimand = "; ".join(e for e in (seeds, sample_estimand(ev, book.definitions[name])) if e)
    row, checks = claim_check(ev.profile, split, result, subset=ev.is_subset, estimand=estimand,
                              gate=ev.settings.gate_expectations, recorded=full_run_verdict(ev, split, result.name))
    rec.add("claims", split, {**row, "seeds": seeds})
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
