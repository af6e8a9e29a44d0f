"""Table II rows (docs/protocol.md#measures, #outputs) for every declared ranker, and the files behind them.

Each declared ranker gets its row, its outcomes and (for rankers that order the full
pool) its TREC run; the output contract is checked here: MRR recomputed from the run
file and qrels alone equals the suite's own MRR, so anyone can check a number with their
own tools.
"""
from __future__ import annotations

import math
from pathlib import Path

from fixtures.artifacts import sha256_file
from fixtures.code import code_digest
from fixtures.populations import eligible_directions
from harness.checks import check_gates
from harness.profile_terms import QUALITY_GATES
from rankers.trec import write_qrels
from rankers.trec_run import direction_coverage
from reports.cost import ranking_cost
from reports.outputs import stash_frame, stash_run
from reports.record import Artifact
from reports.comparisons import pairwise_table
from reports.trec import mrr_from_files


def test_table2_row(evaluation, split, ranker, report, tmp_path: Path) -> None:
    decl = evaluation.decl(ranker)
    row = evaluation.row(split, ranker)
    report.add("table2", split, row, order=decl.order)
    directions = evaluation.directions_for(split, ranker)
    assert row["n"] == len(eligible_directions(directions))
    assert 0 <= row["strict"] + row["ties"] <= row["n"]
    outcomes = evaluation.outcomes(split, ranker)
    report.artifact(split, Artifact("outcomes", stash_frame(evaluation.settings.cache_dir, f"outcomes-{ranker}",
                                                            outcomes), ranker))
    if decl.population != "all":
        report.entry(split, f"sample:{decl.population}", {
            "directions": int(row["n"]), "requested": evaluation.sample_size(decl.population),
            "seed": evaluation.sample_seed(decl.population),
            "of_eligible": int(evaluation.population(split)["eligible"].sum())})
    if decl.designated_only:
        assert math.isnan(row["mrr"]), "a designated-pair ranker has no full-pool position"
        return
    assert 1 <= row["mean_rank_pos"] and 1 <= row["mean_rank_neg"]
    ranking = evaluation.ranking(split, ranker)
    if not decl.is_window:  # a window ranker's cost is its judgments' (test_cost_and_replays)
        report.add("cost", split, ranking_cost(f"{ranker}_rank", ranking), order=decl.order)
    if "coverage" in ranking.info:  # another system's run: what it ranked in the pool and what was dropped
        coverage = {"ranker": ranker, **ranking.info["coverage"],
                    **direction_coverage(ranking, eligible_directions(directions))}
        report.add("coverage", split, coverage, order=decl.order)
        report.entry(split, f"coverage:{ranker}", coverage)
        assert coverage["ties"] == row["ties"] and coverage["directions"] == row["n"]
    run = stash_run(evaluation.settings.cache_dir, ranking)
    report.artifact(split, Artifact("run", run, ranker))
    qrels = write_qrels(directions, tmp_path / "qrels.txt")
    # Recomputed from the files alone; remembered per (run bytes, qrels bytes), so a warm run rereads neither.
    independent = evaluation.memo.get("mrr-from-files", {"run": sha256_file(run), "qrels": sha256_file(qrels),
                                                         "code": code_digest("reports.trec")},
                                      lambda: mrr_from_files(run, qrels))
    assert math.isclose(independent, row["mrr"], rel_tol=1e-12), f"{ranker}: MRR {row['mrr']} vs files {independent}"


def gate_value(row, key: str) -> float:
    """What a ranker's gate measures: its fallback share (% of its directions) or a Table II column."""
    if key == "fallback_pct_max":
        return 100.0 * row["fallback"] / max(row["n"], 1)
    return float(row[QUALITY_GATES[key]])


def test_ranker_gates(evaluation, split, gated_ranker, report) -> None:
    """A ranker's gates (docs/statistics.md#gates): no window ranker may silently fall back to its reference for
    more queries than the profile allows, and a ranker's own quality gates (strict_pct_min, mrr_min) hold, on every
    run, the subsets included."""
    row = evaluation.row(split, gated_ranker)
    gates = evaluation.profile.gates_for(evaluation.decl(gated_ranker))
    check_gates(evaluation.profile, report, split, [(g, gate_value(row, g.key)) for g in gates], subject=gated_ranker)


def test_coverage_gate(evaluation, split, report) -> None:
    pop = evaluation.population(split)
    gate = evaluation.profile.gate("coverage_pct_min")
    check_gates(evaluation.profile, report, split, [(gate, 100.0 * pop["covered"].mean())] if gate else [])


def test_pairwise_differences(evaluation, split, ranked_population, report) -> None:
    """Paired Δ strict and Δ MRR between every two rankers evaluated on the same directions (Holm per measure).

    A ranker whose outcomes cannot be computed costs only its own rows: the others' table is
    reported, then the test fails naming each one left out and why.
    """
    names = [d.name for d in evaluation.profile.ordered() if d.population == ranked_population]
    outcomes, broken = {}, {}
    for name in names:
        try:
            outcomes[name] = evaluation.outcomes(split, name)
        except Exception as exc:  # noqa: BLE001 - reported below against the ranker, after the others' rows
            broken[name] = f"{type(exc).__name__}: {exc}"
    if outcomes:
        table = pairwise_table(outcomes, evaluation.directions_for(split, next(iter(outcomes))),
                               seed=evaluation.settings.seed)
        for i, row in enumerate(table.to_dict("records")):
            report.add("pairwise", split, {**row, "population": ranked_population},
                       order=evaluation.decl(row["first"]).order * 1e4 + i)
    assert not broken, "left out of the pairwise table: " + "; ".join(f"{n}: {e}" for n, e in broken.items())
