"""The study's hypotheses as claims: what they are, how each is measured, and how a family decides them.

A claim says an effect lies on one side of 0: "E0's strict preference
exceeds fusion's on the same directions", "the equal-grade branch holds a larger share
of failures than of directions". Definitions (docs/statistics.md#claims):

- **H1** comparisons a profile declares (``[claims.<name>]`` with ranker, versus, measure);
- **H2** every window ranker against its ``compare_to`` ranker, on strict preference and,
  for a fully scored window, MRR;
- **H3** every argmax window ranker on a bounded grade scale: its equal-grade branch;
- **H3x** (beyond the paper) every expected-grade ranker against its argmax twin on the
  twin's equal-grade directions.

Each claim is measured by a group-level test (``reports.stats``): its one-sided
p-values on both sides, its effect with the source-group bootstrap interval beside it,
and its null spread. A **family** (H1, H2, H3, H3x of the rankers the shipped profiles
declare; a user's ranker gets its own, ``H2:<ranker>``) is then decided together
(docs/statistics.md#decisions):

- every claim contributes two one-sided hypotheses, "holds" (the claimed side) and
  "fails" (the other side), and Holm's procedure runs over all of them, so the chance of
  any wrong verdict in the family is at most α = 0.05;
- **holds** when the claimed side's adjusted p ≤ α, **fails** when the other side's is,
  **inconclusive** otherwise;
- a claim whose sample has too few source groups for any outcome to reach α/2 is
  *unable to decide*: set aside before its outcomes are read, and left out of the family;
- every p-value is the decision test's (``reports.stats.mean_test``), valid for the mean
  difference and not only for exchangeable rankers; with fewer than 40 differing groups it
  includes a bound-aware test (docs/statistics.md#weak-null); an H3 claim whose rarest
  branch × outcome cell expects fewer than ``MIN_CELL`` directions is flagged and cannot
  reach a verdict (docs/statistics.md#h3);
- power is reported beside the verdict, never mixed into it: the MDE at the level
  Holm's first step applies, α / (2 m) for m decidable claims, and the directions that
  would give 80% power at the observed effect (docs/statistics.md#power).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
import pandas as pd

from fixtures.settings import SEED
from rankers.registry import RankerDecl
from reports.bootstrap import N_RESAMPLES, Ratio, RatioDifference, group_bootstrap
from reports.comparisons import compare_on
from reports.measures import PAIRED_MEASURES, outcome_columns, paired_measure
from reports.stats import (ALPHA, MIN_DIFFERING, POWER, directions_needed, group_effect, holm,
                           minimum_detectable_effect, smallest_p)

Status = Literal["holds", "fails", "inconclusive"]
Side = Literal[">", "<"]
#: comparison: ranker vs versus on a measure; tie_branch: H3; tie_resolution: H3x (on the twin's equal-grade directions).
Kind = Literal["comparison", "tie_branch", "tie_resolution"]
#: Columns of a claims table row (``ClaimResult.row``).
CLAIM_COLUMNS = ("claim", "family", "ranker", "versus", "measure", "claimed", "status", "reason", "effect", "lo", "hi",
                 "unit", "p_value", "p_adjusted", "p_opposite", "p_opposite_adjusted", "mde", "mde_level",
                 "directions_needed", "n", "n_groups", "differing_groups", "discordant", "family_hypotheses",
                 "measured")
#: H3: a claim whose rarest branch × outcome cell expects fewer directions than this is flagged (chosen by
#: simulation, docs/statistics.md#h3).
MIN_CELL = 5.0
#: Digits an effect is written with, per unit (from the paired measures' Table II records).
DIGITS = {m.unit: m.digits for m in PAIRED_MEASURES}


# ---- definitions -------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ClaimDefinition:
    """One claim: ``ranker`` vs ``versus`` on ``measure`` (a comparison, or H3x on the twin's equal-grade
    directions) or a ranker's tie branch (H3)."""

    name: str
    family: str
    kind: Kind
    ranker: str
    versus: str = ""
    measure: str = ""
    side: Side = ">"

    def __post_init__(self) -> None:
        if self.side not in (">", "<"):
            raise ValueError(f"claim {self.name!r}: side must be '>' or '<'; got {self.side!r}")

    @property
    def claimed(self) -> str:
        """The claim itself, e.g. ``> 0``."""
        return f"{self.side} 0"


def family_name(family: str, ranker: str, builtin: bool) -> str:
    """A claim's family: the study's own (``H2``) for the shipped profiles' rankers, else one per ranker."""
    return family if builtin else f"{family}:{ranker}"


def same_scorer(a: RankerDecl, b: RankerDecl) -> bool:
    """Two window declarations that read the same judgments: kind and options alike except the grade rule."""
    return a.kind == b.kind and a.scorer_options == b.scorer_options


def h2_claims(windows: Sequence[RankerDecl]) -> dict[str, tuple[str, str, str]]:
    """H2: every window ranker vs its baseline (``compare_to``) -> (ranker, versus, measure)."""
    out: dict[str, tuple[str, str, str]] = {}
    for decl in windows:
        if decl.baseline and decl.baseline != decl.name:
            out[f"h2_{decl.name}_strict_gt_{decl.baseline}"] = (decl.name, decl.baseline, "strict")
            if not decl.designated_only:
                out[f"h2_{decl.name}_mrr_gt_{decl.baseline}"] = (decl.name, decl.baseline, "mrr")
    return out


def h3_claims(windows: Sequence[RankerDecl]) -> dict[str, str]:
    """H3: every argmax window ranker on a bounded grade scale -> its name."""
    return {f"h3_{d.name}_tie_branch_concentrates_failures": d.name for d in windows
            if d.max_score is not None and d.reading != "expected"}


def tie_twins(windows: Sequence[RankerDecl]) -> dict[str, tuple[str, str]]:
    """H3x: each expected-grade ranker and its argmax twin on the same directions -> (expected, argmax).

    The twin shares scorer, population, mode, reference and tie-breaker, so the two differ
    only in how a judgment becomes a score.
    """
    out: dict[str, tuple[str, str]] = {}
    for d in windows:
        if d.reading != "expected":
            continue
        for t in windows:
            if (t.reading != "expected" and same_scorer(d, t) and t.population == d.population
                    and t.mode == d.mode and t.reference == d.reference and t.tie_breaker == d.tie_breaker):
                out[f"h3_{d.name}_resolves_ties_of_{t.name}"] = (d.name, t.name)
                break
    return out


def designated_twins(windows: Sequence[RankerDecl]) -> dict[str, tuple[str, str]]:
    """Each designated-pair ranker and a fully windowed twin (same scorer and grade rule): id -> (designated, window).

    Only for kinds whose designated outcomes equal the window's (pointwise judges); a pairwise or listwise
    judgment of the pair alone is another measurement than the pair's order in the judged window.
    """
    out: dict[str, tuple[str, str]] = {}
    for d in windows:
        if not d.designated_only or not d.spec.pointwise:
            continue
        for w in windows:
            if (not w.designated_only and same_scorer(d, w) and d.reading == w.reading
                    and w.reference == d.reference and w.tie_breaker == d.tie_breaker):
                out[f"{d.name}-vs-{w.name}"] = (d.name, w.name)
    return out


@dataclass(frozen=True)
class DeclaredComparison:
    """A comparison claim as a profile declares it (H1 and any a user adds)."""

    name: str
    family: str
    ranker: str
    versus: str
    measure: str
    side: Side
    builtin: bool


def claim_definitions(comparisons: Sequence[DeclaredComparison], windows: Sequence[RankerDecl],
                      builtin_rankers: frozenset[str]) -> dict[str, ClaimDefinition]:
    """Every claim the declarations imply, by name, each in its family (see the module doc)."""
    out: dict[str, ClaimDefinition] = {}
    for c in comparisons:
        paired_measure(c.measure)  # an unknown measure is an error here, before any work
        out[c.name] = ClaimDefinition(c.name, family_name(c.family or "declared", c.ranker, c.builtin),
                                      "comparison", c.ranker, c.versus, c.measure, c.side)
    for name, (ranker, versus, measure) in h2_claims(windows).items():
        out[name] = ClaimDefinition(name, family_name("H2", ranker, ranker in builtin_rankers), "comparison", ranker,
                                    versus, measure)
    for name, ranker in h3_claims(windows).items():
        out[name] = ClaimDefinition(name, family_name("H3", ranker, ranker in builtin_rankers), "tie_branch", ranker,
                                    measure="tie_branch_share")
    for name, (expected, argmax) in tie_twins(windows).items():
        out[name] = ClaimDefinition(name, family_name("H3x", expected, expected in builtin_rankers),
                                    "tie_resolution", expected, argmax, "strict")
    return out


# ---- measurement -------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ClaimTest:
    """A claim measured on its sample, before its family is known: effect, interval, both one-sided p-values.

    ``n_groups`` counts the source groups of the sample (its design), ``differing_groups`` those
    whose contribution is non-zero (the effective sample), ``discordant`` the directions whose
    outcomes differ (H3: the directions of its rarest branch × outcome cell); ``guarded`` says the
    bound-aware test took part; ``flag`` is why the sample cannot support a verdict (H3's rare
    cell), empty when it can; ``null_sd`` is the effect's sign-flip null SD, in the effect's unit.
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
    return ClaimTest(definition, diff.effect, diff.lo, diff.hi, diff.null_sd, diff.test.p_greater, diff.test.p_less,
                     diff.n, diff.n_groups, measure.unit, measured, diff.differing_groups, diff.discordant,
                     diff.test.guarded)


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
    return ClaimTest(definition, tested.effect, lo, hi, tested.null_sd, tested.test.p_greater, tested.test.p_less, n,
                     tested.n_groups, "pts", measured, tested.differing, min(cells), False, flag)


def not_measured(definition: ClaimDefinition, why: str, unit: str, n: int = 0, n_groups: int = 0) -> ClaimTest:
    """A claim its sample cannot measure (no direction, no failure, no ranks): counted, never decided."""
    nan = float("nan")
    return ClaimTest(definition, nan, nan, nan, nan, nan, nan, n, n_groups, unit, why)


# ---- decisions ---------------------------------------------------------------------------------------------------

def decidable(n_groups: int, alpha: float = ALPHA) -> bool:
    """Whether any outcome of a sample of ``n_groups`` source groups could reach α / 2 (design alone)."""
    return smallest_p(n_groups) <= alpha / 2


def format_interval(lo: float, hi: float, digits: int = 2) -> str:
    """``[+1.10, +5.30]``: signed, so a reader sees at once which side of 0 each end lies on."""
    if math.isnan(lo) or math.isnan(hi):
        return "[—]"
    return f"[{lo:+.{digits}f}, {hi:+.{digits}f}]"


def format_p(p: float) -> str:
    """A p-value to two significant digits ('0.0001' for the Monte Carlo floor 1/10,001: never shown as smaller
    than it is), '—' when absent."""
    if math.isnan(p):
        return "—"
    return f"{p:.2g}"


@dataclass(frozen=True)
class ClaimResult:
    """One claim's verdict with the numbers it rests on (effect, interval and MDE share ``unit``)."""

    definition: ClaimDefinition
    status: Status
    effect: float
    lo: float
    hi: float
    unit: str
    p_value: float
    p_adjusted: float
    p_opposite: float
    p_opposite_adjusted: float
    mde: float
    mde_level: float
    directions_needed: float
    n: int
    n_groups: int
    family_hypotheses: int
    reason: str
    measured: str = ""
    alpha: float = field(default=ALPHA, repr=False)
    differing_groups: int = 0
    discordant: int = 0

    def __post_init__(self) -> None:
        check_verdict(self.status, self.p_adjusted, self.p_opposite_adjusted, self.alpha, self.name)

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def family(self) -> str:
        return self.definition.family

    @property
    def claimed(self) -> str:
        return self.definition.claimed

    def summary(self) -> str:
        """One line for the terminal and report: status, effect, interval, p-values, MDE, n, and why."""
        digits = DIGITS.get(self.unit, 4)
        return (f"{self.status}: {self.effect:+.{digits}f} {self.unit} {format_interval(self.lo, self.hi, digits)} "
                f"(claimed {self.claimed}; {self.sample()}); {self.reason}")

    def sample(self) -> str:
        """The sample beside the verdict: n, groups, and the differing groups and directions the test rests on."""
        return sample_size(self.n, self.n_groups, self.differing_groups, self.discordant, self.definition.kind)

    def row(self) -> dict[str, object]:
        """A claims-table row with ``CLAIM_COLUMNS``."""
        d = self.definition
        return {"claim": d.name, "family": d.family, "ranker": d.ranker, "versus": d.versus, "measure": d.measure,
                "claimed": d.claimed, "status": self.status, "reason": self.reason, "effect": self.effect,
                "lo": self.lo, "hi": self.hi, "unit": self.unit, "p_value": self.p_value,
                "p_adjusted": self.p_adjusted, "p_opposite": self.p_opposite,
                "p_opposite_adjusted": self.p_opposite_adjusted, "mde": self.mde, "mde_level": self.mde_level,
                "directions_needed": self.directions_needed, "n": self.n, "n_groups": self.n_groups,
                "differing_groups": self.differing_groups, "discordant": self.discordant,
                "family_hypotheses": self.family_hypotheses,
                "measured": self.summary() + (f"; {self.measured}" if self.measured and not math.isnan(self.effect)
                                              else "")}  # a claim with no effect quotes it in its reason


def sample_size(n: int, n_groups: int, differing: int, discordant: int, kind: str = "comparison") -> str:
    """``n=150, 38 groups, 21 differing, 30 discordant directions``: the sample and the part of it a test rests on."""
    cell = "in the rarest branch × outcome cell" if kind == "tie_branch" else "discordant"
    return f"n={n}, {n_groups} groups, {differing} differing, {discordant} {cell}"


def check_verdict(status: str, p_adjusted: float, p_opposite_adjusted: float, alpha: float, name: str = "") -> None:
    """holds ⟺ the claimed side's adjusted p ≤ α; fails ⟺ the other side's is; an error otherwise."""
    holds = not math.isnan(p_adjusted) and p_adjusted <= alpha
    fails = not math.isnan(p_opposite_adjusted) and p_opposite_adjusted <= alpha
    expected = "holds" if holds else "fails" if fails else "inconclusive"
    if holds and fails or status != expected:
        raise ValueError(f"claim {name!r}: status {status!r} disagrees with its adjusted p-values "
                         f"({p_adjusted}, other side {p_opposite_adjusted}) at α {alpha}")


def _reason(t: ClaimTest, status: Status, p: float, p_adj: float, q: float, q_adj: float, hypotheses: int,
            mde: float, needed: float, alpha: float) -> str:
    d = t.definition
    digits = DIGITS.get(t.unit, 4)
    if not decidable(t.n_groups, alpha):
        return (f"unable to decide: {t.n_groups} source group(s) give a smallest attainable one-sided p of "
                f"{smallest_p(t.n_groups):.3g} > α/2 = {alpha / 2:g}, whatever the outcomes"
                + (f" ({t.measured})" if math.isnan(t.effect) and t.measured else ""))
    if math.isnan(t.effect):
        return f"not measured: {t.measured}"
    if t.flag:
        return f"unable to decide: {t.flag}"
    tests = (f"one-sided p {format_p(p)} on the claimed side (Holm {format_p(p_adj)}), {format_p(q)} on the other "
             f"(Holm {format_p(q_adj)}) in family {d.family} ({hypotheses} hypotheses, α {alpha:g})")
    power = f"MDE {mde:.{digits}f} {t.unit}" if math.isfinite(mde) else "MDE unknown (no group differs)"
    if t.guarded:
        tests += (f"; only {t.differing_groups} groups differ (< {MIN_DIFFERING}), so the bound-aware test decides "
                  "too (a rare whole-group loss could balance their sum)")
    sample = sample_size(t.n, t.n_groups, t.differing_groups, t.discordant, d.kind)
    if status in ("holds", "fails"):
        return f"{status}: {tests}; {power}; {sample}"
    more = (f"; about {int(needed):,} directions would give 80% power at the observed {t.effect:+.{digits}f} {t.unit}"
            if math.isfinite(needed) else "")
    return f"inconclusive: {tests}; {power} at {sample}{more}"


def decide_family(tests: Sequence[ClaimTest], unmeasured: int = 0, alpha: float = ALPHA,
                  power: float = POWER) -> list[ClaimResult]:
    """Verdicts of one family's claims (see the module doc), in the order given.

    ``unmeasured`` counts the family's decidable claims not measured in this run (deselected
    or skipped): each enters Holm as two hypotheses with p = 1, so the family stays the
    declared one and a partial run is never more decisive than a full one.
    """
    families = {t.definition.family for t in tests}
    if len(families) > 1:
        raise ValueError(f"decide_family takes one family at a time; got {sorted(families)}")
    if unmeasured < 0:
        raise ValueError(f"unmeasured must be >= 0; got {unmeasured}")
    usable = [decidable(t.n_groups, alpha) for t in tests]
    claimed = [1.0 if math.isnan(t.p_claimed) or t.flag else t.p_claimed for t, ok in zip(tests, usable) if ok]
    opposite = [1.0 if math.isnan(t.p_opposite) or t.flag else t.p_opposite for t, ok in zip(tests, usable) if ok]
    m = len(claimed) + unmeasured
    adjusted = holm([*claimed, *opposite, *[1.0] * (2 * unmeasured)])
    level = alpha / (2 * m) if m else float("nan")
    out: list[ClaimResult] = []
    k = 0
    for t, ok in zip(tests, usable):
        nan = float("nan")
        p, q, p_adj, q_adj = (t.p_claimed, t.p_opposite, adjusted[k], adjusted[len(claimed) + k]) if ok \
            else (nan, nan, nan, nan)
        k += ok
        status: Status = "holds" if p_adj <= alpha else "fails" if q_adj <= alpha else "inconclusive"
        mde = minimum_detectable_effect(t.null_sd, level, power) if ok else nan
        needed = directions_needed(t.n, mde, t.effect) if ok else nan
        out.append(ClaimResult(t.definition, status, t.effect, t.lo, t.hi, t.unit, p, p_adj, q, q_adj, mde, level,
                               needed, t.n, t.n_groups, 2 * m, _reason(t, status, p, p_adj, q, q_adj, 2 * m, mde,
                                                                       needed, alpha), t.measured, alpha,
                               t.differing_groups, t.discordant))
    return out


def robust_to_noise(exact: ClaimResult, noisy: ClaimResult, noise: str) -> ClaimResult:
    """A claim about trained rankers, decisive only where the models retrained on noisy inputs decide it the same way
    (docs/statistics.md#perturbation).

    Each side's adjusted p is the larger of the two Holm-adjusted p's, so the claim holds (fails) only when both
    families reject on that side; the rejections are a subset of the exact family's, whose family-wise error they keep.
    Effect, interval, raw p and power stay the exact inputs' (the paper's protocol); ``noise`` names the perturbation.
    """
    if math.isnan(exact.p_adjusted) or math.isnan(noisy.p_adjusted):
        return exact
    p_adj, q_adj = max(exact.p_adjusted, noisy.p_adjusted), max(exact.p_opposite_adjusted, noisy.p_opposite_adjusted)
    status: Status = "holds" if p_adj <= exact.alpha else "fails" if q_adj <= exact.alpha else "inconclusive"
    seen = (f"retrained on {noise}: {noisy.status} (Holm {format_p(noisy.p_adjusted)} on the claimed side, "
            f"{format_p(noisy.p_opposite_adjusted)} on the other)")
    reason = exact.reason if noisy.status == exact.status else (
        f"inconclusive: {exact.status} on the exact inputs but {seen}, so the verdict hinges on floating-point noise; "
        f"exact inputs: {exact.reason}")
    return replace(exact, status=status, p_adjusted=p_adj, p_opposite_adjusted=q_adj, reason=reason,
                   measured=f"{exact.measured}; {seen}" if exact.measured else seen)
