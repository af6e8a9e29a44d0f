"""Confirmatory simulations of printed rates through the shipped decision code, too long for CI
(docs/statistics.md#tost, #weak-null, #outcome-models record their results with date and counts):

    python -m tests.support.rate_checks pins --runs 400     # reports.changes.paired_change, rerun by rerun
    python -m tests.support.rate_checks band --runs 10000   # reports.group_tests.mean_test, sample by sample

``pins``: a pin's decision (changed / unchanged / undetermined or margin unreachable) for true changes of 0.5 and
0.99 × the ±1-point margin under 5% churn and of 2.7 × under 2% and 5%, of single directions or whole groups, on the frozen Test pool's
fusion outcomes and on 420 synthetic groups of 1–12 directions (``tests.support.pin_reruns``). ``band``: false
verdicts of one claim on each side at α/2 under the weak null with rare whole-group losses against one-direction
gains (``tests.support.weak_nulls``), 60–200 differing groups, Test's groups, groups of 1–12 and the heavy-tailed
stress shape.
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np

from reports.changes import paired_change
from reports.group_tests import mean_test
from tests.support.pin_reruns import outcome_frame, real_test, reruns, synthetic
from tests.support.weak_nulls import SHAPES, rare_whole_group_losses

CELLS = [(0.5, 0.05), (0.99, 0.05), (2.7, 0.02), (2.7, 0.05)]


def _rate(k: int, n: int) -> str:
    p = k / n
    return f"{100 * p:.2f} ± {100 * math.sqrt(max(p * (1 - p), 1e-12) / n):.2f}%"


def pins(runs: int) -> None:
    from fixtures.study import build_study

    for design in (real_test(build_study()), synthetic()):
        for unit in ("directions", "groups"):
            for k, (factor, churn) in enumerate(CELLS):
                now, then = reruns(design, factor, churn, unit, runs, 1000 + 100 * k)
                counts: dict[str, int] = {}
                started = time.perf_counter()
                for i in range(runs):
                    decision = paired_change("strict_pct", outcome_frame(now[i]), outcome_frame(then[i]),
                                             design.codes, 1.0, seed=i).decision
                    counts[decision] = counts.get(decision, 0) + 1
                print(f"{design.name}, churn of {unit} {100 * churn:g}%, true change {factor:g} x the margin, {runs} "
                      f"reruns ({time.perf_counter() - started:.0f} s): "
                      + ", ".join(f"{d} {_rate(c, runs)}" for d, c in sorted(counts.items())), flush=True)


def band(runs: int) -> None:
    for shape in ("Test", "1-12", "heavy"):
        for differing in (60, 75, 100, 130, 160, 200):
            rng = np.random.default_rng(2000 + differing)
            sizes = SHAPES[shape](rng, runs)
            sums = rare_whole_group_losses(rng, sizes, differing)
            holds = fails = 0
            for i in range(runs):
                test = mean_test(sums[i], float(sizes[i].max()), seed=i)
                holds += test.p_greater <= 0.025
                fails += test.p_less <= 0.025
            print(f"weak null, {shape} groups, ~{(sums != 0).sum(axis=1).mean():.0f} differing, {runs} samples: false "
                  f"holds {_rate(holds, runs)}, false fails {_rate(fails, runs)}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m tests.support.rate_checks", description=__doc__.splitlines()[0])
    parser.add_argument("check", choices=["pins", "band"])
    parser.add_argument("--runs", type=int, default=400)
    args = parser.parse_args()
    {"pins": pins, "band": band}[args.check](args.runs)
