"""How each claim is measured on its sample, before its family is known (docs/statistics.md#claims).

A claim is measured by a group-level test (``reports.stats``): its one-sided p-values on both sides, its effect with
the source-group bootstrap interval beside it, and its null spread. Every p-value is the decision test's
(``reports.group_tests.mean_test``), valid for the mean difference and not only for exchangeable rankers; an H3
claim whose rarest branch × outcome cell expects fewer than ``MIN_CELL`` directions is flagged and cannot reach a
verdict (docs/statistics.md#h3).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from fixtures.settings import SEED
from reports.bootstrap import N_RESAMPLES, Ratio, RatioDifference, group_bootstrap
from reports.claim_families import ClaimDefinition
from reports.comparisons import compare_on
from reports.decision_intervals import ShiftedTest
from reports.group_tests import N_PERMUTATIONS
from reports.measures import paired_measure
from reports.outcomes import outcome_columns
from reports.power import PowerDesign
from reports.stats import PairedDifference, group_effect

#: H3: a claim whose rarest branch × outcome cell expects fewer directions than this is flagged (chosen by
#: simulation, docs/statistics.md#h3).
MIN_CELL = 5.0


@dataclass(frozen=True)
class ClaimTest:
    """A claim measured on its sample, before its family is known: effect, interval, both one-sided p-values.

    ``n_groups`` counts the source groups of the sample (its design), ``differing_groups`` those
    whose contribution is non-zero (the effective sample), ``discordant`` the directions whose
    outcomes differ (H3: the directions of its rarest branch × outcome cell); ``guarded`` says the
    bound-aware test took part; ``flag`` is why the sample cannot support a verdict (H3's rare
    cell), empty when it can; ``null_sd`` is the effect's sign-flip null SD, in the effect's unit; ``design``
    is what the decision test's power is simulated on (``reports.power``; None for H3, whose MDE is the normal
    one of its sign-flip statistic); ``units`` names what ``n_groups`` counts, the sample design's units
    (``fixtures.samples.DESIGNS``: source groups, complete pairs or single directions); ``shifted`` is the same test
    read at any boundary, what the claim's decision interval inverts (``reports.decision_intervals``; None where no
    test decides it).
    """

    definition: ClaimDefinition
    effect: float
    lo: float
    hi: float
    null_sd: float
    p_greater: float
    p_less: float
    n: int
    n_groups: int
    unit: str
    measured: str = ""
    differing_groups: int = 0
    discordant: int = 0
    guarded: bool = False
    flag: str = ""
    design: PowerDesign | None = None
    bootstrap: tuple[float, float] | None = None
    anytime: bool = False
    units: str = "groups"
    shifted: ShiftedTest | None = None

    @property
    def p_claimed(self) -> float:
        return self.p_greater if self.definition.side == ">" else self.p_less

    @property
    def p_opposite(self) -> float:
        return self.p_less if self.definition.side == ">" else self.p_greater


def _rates(outcomes: pd.DataFrame) -> str:
    cols = outcome_columns(outcomes)
    text = f"strict {int(cols['strict'].sum())}/{len(outcomes)} ({100.0 * cols['strict'].mean():.2f}%)"
    return text + (f", MRR {np.mean(1.0 / cols['rank_pos']):.4f}" if "rank_pos" in cols else "")


def measure_comparison(definition: ClaimDefinition, first: pd.DataFrame, second: pd.DataFrame,
                       directions_annotated: pd.DataFrame, seed: int = SEED, note: str = "") -> ClaimTest:
    """``ranker`` minus ``versus`` on the claim's measure over the same directions (``second`` restricted to them)."""
    measure = paired_measure(definition.measure)
    if len(first) == 0:
        return not_measured(definition, note or "no direction to compare on", measure.unit)
    diff = compare_on(measure, first, second, directions_annotated, seed=seed,
                      names=(definition.ranker, definition.versus))
    if diff is None:
        return not_measured(definition, f"{measure.name} needs full-pool ranks of both rankers", measure.unit)
    measured = (f"{definition.ranker}: {_rates(first)}; {definition.versus} on the same {len(second)} directions: "
                f"{_rates(second)}" + (f"; {note}" if note else ""))
    return comparison_test(definition, diff, measure.unit, measure.digits, measured, seed)


def comparison_test(definition: ClaimDefinition, diff: PairedDifference, unit: str, digits: int, measured: str = "",
                    seed: int = SEED, n_permutations: int = N_PERMUTATIONS) -> ClaimTest:
    """A comparison claim measured by one paired difference (``reports.stats.paired_difference``, ``seed`` and
    ``n_permutations`` its test's), with the shifted test its decision interval inverts: the groups' summed
    differences D_g moved by t n_g."""
    shifted = None
    if diff.group_sums and diff.design is not None:
        sizes = tuple(float(s) for s in diff.design.sizes)
        shifted = ShiftedTest(diff.group_sums, sizes, diff.design.scale / diff.n, 1.0, max(sizes), diff.test.guarded,
                              0.5 * 10.0 ** -digits, seed=seed, n_permutations=n_permutations)
    return ClaimTest(definition, diff.effect, diff.lo, diff.hi, diff.null_sd, diff.test.p_greater, diff.test.p_less,
                     diff.n, diff.n_groups, unit, measured, diff.differing_groups, diff.discordant,
                     diff.test.guarded, design=diff.design, shifted=shifted)


def measure_tie_branch(definition: ClaimDefinition, per_direction: pd.DataFrame, groups: np.ndarray,
                       seed: int = SEED, n_resamples: int = N_RESAMPLES) -> ClaimTest:
    """H3: the equal-score branch's share of non-successes minus its share of directions, in points.

    With e = 1 in the equal-score branch and f = 1 for a non-success, the difference is
    θ = Σef/Σf − Σe/n = Σ(e − ē)(f − f̄) / Σf: the branch and failure are associated. The
    group contributions u_g = Σ_{i∈g} (e_i − ē)(f_i − f̄) are tested by sign flips and the
    skew-corrected t (the estimating equation of θ = 0 summed per group; docs/statistics.md#h3),
    and the share difference's bootstrap interval is reported beside it. When the rarest cell of
    branch × outcome expects fewer than ``MIN_CELL`` directions (n × min(ē, 1 − ē) × min(f̄, 1 − f̄)),
    the claim is flagged: its few directions carry the whole statistic.
    """
    equal = (per_direction["branch"] == "equal_score").to_numpy(dtype=float)
    failed = (~per_direction["strict"].to_numpy(dtype=bool)).astype(float)
    n, n_fail = len(equal), float(failed.sum())
    n_eq = int(equal.sum())
    labels = np.asarray(groups)
    if n == 0 or n_fail == 0:
        return not_measured(definition, f"{definition.ranker}: {n} directions, {int(n_fail)} non-successes: "
                                        "the shares are undefined", "pts", n, len(pd.unique(labels)))
    u = (equal - equal.mean()) * (failed - failed.mean())
    tested = group_effect(u, labels, 100.0 / n_fail, seed=seed, min_differing=0)
    e_bar, f_bar = equal.mean(), failed.mean()
    expected_cell = n * min(e_bar, 1 - e_bar) * min(f_bar, 1 - f_bar)
    cells = [int(((equal == e) & (failed == f)).sum()) for e in (0, 1) for f in (0, 1)]
    flag = (f"its rarest branch × outcome cell expects {expected_cell:.1f} directions (< {MIN_CELL:g}): too few to "
            "decide the association" if expected_cell < MIN_CELL else "")
    values = {"eq_fail": equal * failed, "fail": failed, "eq": equal, "n": np.ones(n)}
    try:
        ci = group_bootstrap(values, labels, {"h3": RatioDifference(Ratio("eq_fail", "fail"), Ratio("eq", "n"))},
                             n_resamples, seed)["h3"]
        lo, hi = 100 * ci.lo, 100 * ci.hi
    except ValueError:  # a resample without a non-success: the interval is undefined, the test is not
        lo = hi = float("nan")
    measured = (f"{definition.ranker}: equal-score branch {n_eq}/{n} directions ({100 * n_eq / n:.2f}%), "
                f"{int((equal * failed).sum())}/{int(n_fail)} non-successes "
                f"({100 * (equal * failed).sum() / n_fail:.2f}%)")
    codes = pd.factorize(labels, sort=True)[0]
    # θ = θ₀ moves each group's estimating-equation sum u_g by θ₀ F_g (F_g its non-successes): Σ_g (u_g − θ₀ F_g) = 0.
    shifted = ShiftedTest(tuple(np.bincount(codes, weights=u).tolist()),
                          tuple(np.bincount(codes, weights=failed).tolist()), 100.0 / n_fail, 1.0,
                          float(np.bincount(codes).max()), False, 0.005, seed=seed)
    return ClaimTest(definition, tested.effect, lo, hi, tested.null_sd, tested.test.p_greater, tested.test.p_less, n,
                     tested.n_groups, "pts", measured, tested.differing, min(cells), False, flag, shifted=shifted)


def not_measured(definition: ClaimDefinition, why: str, unit: str, n: int = 0, n_groups: int = 0) -> ClaimTest:
    """A claim its sample cannot measure (no direction, no failure, no ranks): counted, never decided."""
    nan = float("nan")
    return ClaimTest(definition, nan, nan, nan, nan, nan, nan, n, n_groups, unit, why)
