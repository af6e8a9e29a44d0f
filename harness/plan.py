"""Plan a sequential sample before any judgment: the judgments a verdict is expected to cost, beside the fixed MDE.

    python -m harness.plan --profile embedded --sample grader_pairs --effect 10 --effect 25

For each assumed effect (points of strict preference, or MRR units with ``--mrr-sd``), the
sample's design is simulated (``reports.sequential.plan``): the split's real source groups in
random orders, the sample's batch and budget (a fixed sample: 4 groups a look up to twice its
size), Holm over its largest family of claims, and a look after every batch. It prints the
share of simulated samples decided within the budget, the mean directions and judgments to the
verdict, and the fixed design's MDE and power (docs/statistics.md#sequential-samples).
Group sizes are the split's planned directions (before pool coverage), so they are known now; a sample of
complete pairs (``design = "pairs"``) draws units of a pair's directions, one of single directions
(``design = "directions"``) units of one direction each.
"""
from __future__ import annotations

import argparse
from collections.abc import Sequence

from fixtures.settings import EVALUABLE_SPLITS
from fixtures.samples import UNITS, sampling_units
from fixtures.study import build_study
from harness.profile import load_profile
from harness.profile_records import ProfileError
from harness.sequential import family_sizes, sample_claims
from rankers.window import WINDOW_K
from reports.sequential import plan


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


def main(argv: Sequence[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(prog="python -m harness.plan", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="embedded", help="profile name or .toml path (default: %(default)s)")
    parser.add_argument("--sample", required=True, help="the profile's [samples.<name>] to plan")
    parser.add_argument("--split", default="test", choices=EVALUABLE_SPLITS,
                        help="split whose source groups are drawn (default: %(default)s)")
    parser.add_argument("--effect", type=float, action="append", required=True,
                        help="assumed effect: points of strict preference (or MRR with --mrr-sd); repeatable")
    parser.add_argument("--discordant", type=float, default=0.45, help="share of directions the rankers differ on")
    parser.add_argument("--blind", type=float, default=0.3, help="share of query-blind pairs (d2 = -d1)")
    parser.add_argument("--mrr-sd", type=float, default=None, help="plan an MRR claim: SD of per-direction Δ")
    parser.add_argument("--runs", type=int, default=400, help="simulated samples per effect (default: %(default)s)")
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
    for effect in args.effect:
        result = plan(sizes, effect, batch, int(limit), int(fixed), hypotheses, args.discordant, args.blind,
                      args.mrr_sd, scale, args.runs)
        lines.append(result.line(unit, per_direction))
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main()
