"""Plan a sequential sample before any judgment: the judgments a verdict is expected to cost, beside the fixed MDE.

    python -m harness.plan --profile embedded --sample grader_pairs --effect 10 --effect 25

For each assumed effect (points of strict preference, or MRR units with ``--mrr-sd``), the
sample's design is simulated (``reports.sequential.plan``): the split's real source groups in
random orders, the sample's batch and budget (a fixed sample: 4 groups a look up to twice its
size), Holm over its largest family of claims, and a look after every batch. It prints the
share of simulated samples decided within the budget and the mean directions and judgments to the
verdict (docs/statistics.md#sequential-samples).
Group sizes are the split's planned directions (before pool coverage), so they are known now; a sample of
complete pairs (``design = "pairs"``) draws units of a pair's directions, one of single directions
(``design = "directions"``) units of one direction each.

A fixed design's power depends on how an effect spreads over the units, so for strict preference the plan prints
the MDE and power under each outcome model of ``reports.outcome_models`` (the plan's, two rankers deciding pairs
query-blind at different rates, two correlated rankers of which the candidate decides whole units, and units
resampled from a previous run of the profile when ``--previous``'s history holds one), each power with its
simulation standard error, and its first line is the worst case over them (docs/statistics.md#outcome-models).
"""
from __future__ import annotations

import argparse
from collections.abc import Sequence

import math
from pathlib import Path

import pandas as pd

from fixtures.settings import EVALUABLE_SPLITS, Settings
from fixtures.samples import UNITS, sampling_units
from fixtures.study import build_study
from harness.profile import load_profile
from harness.profile_records import ProfileError
from harness.sequential import family_sizes, sample_claims
from rankers.window import WINDOW_K
from reports.history import HISTORY, HistoryError, open_saved, saved_runs
from reports.outcome_models import (BLIND, DISCORDANT, MDE_RUNS, POWER_RUNS, ResampledModel, family_power,
                                    outcome_family)
from reports.sequential import plan
from reports.stats import ALPHA


def judgments_per_direction(profile, sample: str) -> int:
    """Judgments one direction of the sample costs: 2 designated passages or a window of 20, per distinct scorer."""
    seen: set[tuple] = set()
    total = 0
    for decl in profile.ordered():
        if decl.population != sample or not decl.is_window:
            continue
        key = (decl.kind, repr(sorted(decl.scorer_options.items())), decl.designated_only)
        if key not in seen:
            seen.add(key)
            total += 2 if decl.designated_only else WINDOW_K
    return total


def previous_model(results_dir: Path, profile, sample: str, split: str, units: pd.DataFrame) -> ResampledModel | None:
    """The resampled outcome model from the newest saved full run of the profile in ``results_dir`` that holds both
    rankers of one of the sample's strict-preference claims on the sample's directions; None without one. A subset
    run (CI's few pairs) is passed over: a handful of units is no distribution to plan a sample from."""
    pairs = [(d.ranker, d.versus) for d in sample_claims(profile, sample).values()
             if d.versus and d.measure == "strict"]
    for run in reversed(saved_runs(results_dir) if Path(results_dir).is_dir() else []):
        try:
            saved = open_saved(Path(results_dir) / HISTORY / run, split)
        except HistoryError:
            continue
        if saved.manifest.get("profile", {}).get("name") != profile.name or saved.manifest.get("scope") != "full":
            continue
        for ranker, versus in pairs:
            mine, theirs = saved.outcomes(ranker), saved.outcomes(versus)
            if mine is None or theirs is None:
                continue
            joined = mine.merge(theirs, on="qid", suffixes=("", "_versus")).merge(units[["qid", "group"]], on="qid")
            if len(joined):
                d = joined["strict"].astype(float) - joined["strict_versus"].astype(float)
                return ResampledModel.of(d.to_numpy(), joined["group"].to_numpy(),
                                         f"run {run} ({ranker} vs {versus}, {len(joined)} directions)")
    return None


def model_lines(results, fixed: int, level: float, effects: list[float]) -> tuple[str, list[str]]:
    """The worst case over the outcome models (the plan's first line) and each model's row: MDE, the power there
    and at each assumed effect, each power with its simulation standard error."""
    runs = results[0].runs

    def power(row, p: float) -> str:
        return "—" if math.isnan(p) else f"{100 * p:.1f} ± {100 * row.se(p):.1f}%"

    def mde(value: float) -> str:
        return f"{value:.2f} pts" if math.isfinite(value) else "beyond what it allows"

    rows = [f"the fixed {fixed}-direction sample under each outcome model (decision test at one-sided level "
            f"{level:.4g}; each power from {runs:,} simulated samples, SE at most {50 / math.sqrt(runs):.2g} points; "
            "docs/statistics.md#outcome-models):"]
    for row in results:
        rows.append(f"  {row.words}: MDE {mde(row.mde)}"
                    + (f" (power there {power(row, row.power_at_mde)})" if math.isfinite(row.mde) else "")
                    + "; power " + ", ".join(f"{power(row, p)} at {e:+.3g} pts" for e, p in zip(effects, row.powers)))
    hardest = max(results, key=lambda r: r.mde)
    worst = [min((r for r in results if not math.isnan(r.powers[k])), key=lambda r: r.powers[k], default=None)
             for k in range(len(effects))]
    head = (f"worst case over {len(results)} outcome models, the fixed {fixed}-direction sample (decision test at "
            f"one-sided level {level:.4g}): MDE {mde(hardest.mde)} ({hardest.model}); power "
            + ", ".join("—" if w is None else f"{power(w, w.powers[k])} at {e:+.3g} pts ({w.model})"
                        for k, (e, w) in enumerate(zip(effects, worst))))
    return head, rows


def main(argv: Sequence[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(prog="python -m harness.plan", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="embedded", help="profile name or .toml path (default: %(default)s)")
    parser.add_argument("--sample", required=True, help="the profile's [samples.<name>] to plan")
    parser.add_argument("--split", default="test", choices=EVALUABLE_SPLITS,
                        help="split whose source groups are drawn (default: %(default)s)")
    parser.add_argument("--effect", type=float, action="append", required=True,
                        help="assumed effect: points of strict preference (or MRR with --mrr-sd); repeatable")
    parser.add_argument("--discordant", type=float, default=DISCORDANT,
                        help="share of directions the rankers differ on (default: %(default)s)")
    parser.add_argument("--blind", type=float, default=BLIND,
                        help="share of query-blind pairs (d2 = -d1; default: %(default)s)")
    parser.add_argument("--mrr-sd", type=float, default=None, help="plan an MRR claim: SD of per-direction Δ")
    parser.add_argument("--runs", type=int, default=400,
                        help="simulated samples per effect of the sequential plan (default: %(default)s)")
    parser.add_argument("--model-runs", type=int, default=POWER_RUNS,
                        help="simulated fixed samples behind each printed power of the outcome models (default: "
                             "%(default)s, SE at most 0.5 points)")
    parser.add_argument("--previous", default=str(Settings().results_dir),
                        help="results folder whose history may hold a previous run of the profile, to resample its "
                             "per-unit outcomes (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        profile = load_profile(args.profile)
    except ProfileError as exc:
        parser.error(f"--profile: {exc}")
    if args.sample not in profile.samples:
        parser.error(f"{profile.path}: no [samples.{args.sample}]; declared: {sorted(profile.samples)}")
    spec = profile.samples[args.sample]
    directions = sampling_units(build_study().split(args.split), spec.design)
    sizes = directions.groupby("group").size().to_numpy()
    fixed = spec.size_on(args.split) or int(sizes.sum())
    batch, limit = (spec.batch, spec.budget.max_directions) if spec.sequential else (4, min(2 * fixed, sizes.sum()))
    families = family_sizes(profile)
    hypotheses = max([families[d.family] for d in sample_claims(profile, args.sample).values()], default=2)
    per_direction = judgments_per_direction(profile, args.sample)
    unit, scale = ("MRR", 1.0) if args.mrr_sd is not None else ("pts", 100.0)
    lines = [f"{profile.name} [samples.{args.sample}] on {args.split}: {len(sizes)} {UNITS[spec.design]}, "
             f"{batch} a look, up to {limit} directions; Holm over {hypotheses} hypotheses; {per_direction} judgments "
             "a direction"]
    plans = [plan(sizes, effect, batch, int(limit), int(fixed), hypotheses, args.discordant, args.blind,
                  args.mrr_sd, scale, args.runs) for effect in args.effect]
    lines += [result.line(unit, per_direction) for result in plans]
    if args.mrr_sd is None:
        models = outcome_family(args.discordant, args.blind)
        previous = previous_model(Path(args.previous), profile, args.sample, args.split, directions)
        models += [previous] if previous is not None else []
        results = family_power(models, sizes, int(fixed), ALPHA / hypotheses, args.effect, scale,
                               mde_runs=min(MDE_RUNS, args.model_runs), power_runs=args.model_runs)
        head, rows = model_lines(results, int(fixed), ALPHA / hypotheses, args.effect)
        lines = [head, *lines, *rows]
        if previous is None:
            lines.append(f"(no saved run of {profile.name} in {args.previous} holds the sample's rankers: no resampled "
                         "model)")
    else:  # one outcome model for a mean measure: its fixed design is the whole family
        lines.insert(0, f"the fixed {fixed}-direction sample under the one MRR outcome model (per-direction "
                        f"differences of SD {args.mrr_sd:g}; decision test at one-sided level "
                        f"{ALPHA / hypotheses:.4g}): MDE {plans[0].fixed_mde:.3g} MRR; power " + ", ".join(
                            f"{100 * p.fixed_power:.0f} ± {100 * math.sqrt(p.fixed_power * (1 - p.fixed_power) / p.runs):.1f}%"
                            f" at {p.effect:+.3g} MRR" for p in plans))
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main()
