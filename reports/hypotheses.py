"""How a family of claims is decided (docs/statistics.md#decisions), and a verdict written down.

What the claims are is ``reports.claim_families``; how each is measured, ``reports.claim_measures``. A family
(H1, H2, H3, H3x, or a user's ranker's own) is decided together:

- every claim contributes two one-sided hypotheses, "holds" (the claimed side) and
  "fails" (the other side), and Holm's procedure runs over all of them, so the chance of
  any wrong verdict in the family is at most α = 0.05;
- **holds** when the claimed side's adjusted p ≤ α, **fails** when the other side's is,
  **inconclusive** otherwise;
- a claim whose sample has too few source groups for any outcome to reach α/2 is
  *unable to decide*: set aside before its outcomes are read, and left out of the family;
- with fewer than 60 differing groups the decision test includes a bound-aware test
  (docs/statistics.md#weak-null); a flagged claim (H3's rare cell) cannot reach a verdict;
- power is reported beside the verdict, never mixed into it: the MDE at the level
  Holm's first step applies, α / (2 m) for m decidable claims, and the directions that
  would give 80% power at the observed effect (docs/statistics.md#power);
- the verdict is read from the claim's **decision interval**, its decision test inverted at the levels Holm leaves
  it (``reports.decision_intervals``): the two never disagree, and a row that would is refused (``check_verdict``).
  The bootstrap interval beside it describes the effect and decides nothing.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, get_args

from reports.claim_families import ClaimDefinition
from reports.claim_measures import ClaimTest
from reports.decision_intervals import DecisionInterval, agrees, holm_interval, kept_bound
from reports.measures import PAIRED_MEASURES
from reports.group_tests import MIN_DIFFERING, smallest_decision_p
from reports.power import DECISION_TEST, decision_directions_needed, decision_mde
from reports.sequential import MAX_BET
from reports.stats import ALPHA, POWER, directions_needed, holm, minimum_detectable_effect

Status = Literal["holds", "fails", "inconclusive"]
#: Every verdict a claim can get.
STATUSES: tuple[str, ...] = get_args(Status)
#: Digits an effect is written with, per unit (from the paired measures' Table II records).
DIGITS = {m.unit: m.digits for m in PAIRED_MEASURES}


def decidable(sizes: Sequence[int], alpha: float = ALPHA, guarded: bool = True) -> bool:
    """Whether any outcome on source groups of these sizes could reach α / 2 under the decision test (design alone;
    ``guarded`` False for H3, which the bound-aware part never joins)."""
    return smallest_decision_p(sizes, guarded) <= alpha / 2


def smallest_claim_p(t: ClaimTest) -> float:
    """The smallest one-sided p a measured claim's own test can give on its groups: the decision test's, or for an
    anytime-valid test at a sequential stop the bettor's (1 + ``MAX_BET``)^−G (its wealth grows at most that)."""
    if t.anytime:
        return (1.0 + MAX_BET) ** -t.n_groups
    return smallest_decision_p(*design_sizes(t))


def design_sizes(t: ClaimTest) -> tuple[tuple[int, ...], bool]:
    """A measured claim's group sizes and whether its test is guarded (groups of one direction when its design is
    not known: the bound-aware part then sees equal groups)."""
    sizes = t.design.sizes if t.design is not None else (1,) * t.n_groups
    return sizes, t.definition.kind != "tie_branch"


#: What the bootstrap interval beside a verdict is: it describes the effect and decides nothing
#: (docs/statistics.md#decision-intervals).
DESCRIPTIVE = "descriptive 95% bootstrap interval (unadjusted)"
SEQUENCE = "descriptive 95% confidence sequence (unadjusted)"


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
    mde_test: str = ""
    family_members: str = ""
    test: ClaimTest | None = field(default=None, repr=False, compare=False)
    decision: DecisionInterval = field(default_factory=DecisionInterval.none)

    def __post_init__(self) -> None:
        check_verdict(self.status, self.p_adjusted, self.p_opposite_adjusted, self.alpha, self.name)
        if self.decision.defined and not agrees(self.status, self.definition.side, self.decision):
            raise ValueError(f"claim {self.name!r}: status {self.status!r} disagrees with its decision interval "
                             f"{self.decision.text(DIGITS.get(self.unit, 4))} (claimed {self.claimed})")

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def bootstrap_interval(self) -> tuple[float, float]:
        """The fixed-sample bootstrap interval: ``lo``/``hi`` themselves, unless they are a sequential stop's
        confidence sequence (docs/statistics.md#sequential-samples)."""
        if self.test is not None and self.test.bootstrap is not None:
            return self.test.bootstrap
        return self.lo, self.hi

    @property
    def descriptive(self) -> str:
        """What ``lo``/``hi`` are: the unadjusted bootstrap interval, or at a sequential stop the confidence
        sequence; neither decides."""
        return SEQUENCE if self.test is not None and self.test.anytime else DESCRIPTIVE

    @property
    def family(self) -> str:
        return self.definition.family

    @property
    def claimed(self) -> str:
        return self.definition.claimed

    def summary(self) -> str:
        """One line for the terminal and report: status, effect, decision interval, the descriptive interval,
        p-values, MDE, n, and why."""
        digits = DIGITS.get(self.unit, 4)
        decision = f" decision interval {self.decision.text(digits)}," if self.decision.defined else ""
        return (f"{self.status}: {self.effect:+.{digits}f} {self.unit},{decision} {self.descriptive} "
                f"{format_interval(self.lo, self.hi, digits)} (claimed {self.claimed}; {self.sample()}); {self.reason}")

    @property
    def units(self) -> str:
        """What ``n_groups`` counts: the sample design's units (source groups unless a sample drew pairs or
        directions)."""
        return self.test.units if self.test is not None else "groups"

    def sample(self) -> str:
        """The sample beside the verdict: n, units, and the differing units and directions the test rests on."""
        return sample_size(self.n, self.n_groups, self.differing_groups, self.discordant, self.definition.kind,
                           self.units)

    def row(self) -> dict[str, object]:
        """The claims-table columns a verdict knows (``reports.table_registry.TABLES['claims']``); the part adds
        what the profile expected of it and who declared that."""
        d = self.definition
        return {"claim": d.name, "family": d.family, "ranker": d.ranker, "versus": d.versus, "measure": d.measure,
                "claimed": d.claimed, "status": self.status, "reason": self.reason, "effect": self.effect,
                "decision_lo": self.decision.lo, "decision_hi": self.decision.hi,
                "decision_level": self.decision.level, "lo": self.lo, "hi": self.hi, "unit": self.unit,
                "p_value": self.p_value,
                "p_adjusted": self.p_adjusted, "p_opposite": self.p_opposite,
                "p_opposite_adjusted": self.p_opposite_adjusted, "mde": self.mde, "mde_level": self.mde_level,
                "mde_test": self.mde_test, "directions_needed": self.directions_needed, "n": self.n,
                "n_groups": self.n_groups, "units": self.units, "differing_groups": self.differing_groups,
                "discordant": self.discordant,
                "family_hypotheses": self.family_hypotheses, "family_members": self.family_members,
                "measured": self.summary() + (f"; {self.measured}" if self.measured and not math.isnan(self.effect)
                                              else "")}  # a claim with no effect quotes it in its reason


def sample_size(n: int, n_groups: int, differing: int, discordant: int, kind: str = "comparison",
                units: str = "groups") -> str:
    """``n=150, 38 groups, 21 differing, 30 discordant directions``: the sample and the part of it a test rests on,
    counted in the design's units (``n=150, 75 pairs, ...``; ``n=150 single-direction units, ...``)."""
    cell = "in the rarest branch × outcome cell" if kind == "tie_branch" else "discordant"
    if units == "directions":
        return f"n={n} single-direction units, {differing} differing, {discordant} {cell}"
    return f"n={n}, {n_groups} {units}, {differing} differing, {discordant} {cell}"


def check_verdict(status: str, p_adjusted: float, p_opposite_adjusted: float, alpha: float, name: str = "") -> None:
    """holds ⟺ the claimed side's adjusted p ≤ α; fails ⟺ the other side's is; an error otherwise."""
    holds = not math.isnan(p_adjusted) and p_adjusted <= alpha
    fails = not math.isnan(p_opposite_adjusted) and p_opposite_adjusted <= alpha
    expected = "holds" if holds else "fails" if fails else "inconclusive"
    if holds and fails or status != expected:
        raise ValueError(f"claim {name!r}: status {status!r} disagrees with its adjusted p-values "
                         f"({p_adjusted}, other side {p_opposite_adjusted}) at α {alpha}")


def _reason(t: ClaimTest, status: Status, p: float, p_adj: float, q: float, q_adj: float, hypotheses: int,
            mde: float, needed: float, alpha: float, mde_test: str, members: str = "", holm_note: str = "") -> str:
    d = t.definition
    digits = DIGITS.get(t.unit, 4)
    if smallest_claim_p(t) > alpha / 2:
        which = "the anytime-valid test" if t.anytime else "the decision test"
        return (f"unable to decide: {t.n_groups} source group(s) give a smallest attainable one-sided p of "
                f"{smallest_claim_p(t):.3g} > α/2 = {alpha / 2:g} ({which}), whatever the outcomes, so it is left out "
                "of its family"
                + (f" ({t.measured})" if math.isnan(t.effect) and t.measured else ""))
    if math.isnan(t.effect):
        return f"not measured: {t.measured}"
    if t.flag:
        return f"unable to decide: {t.flag}"
    tests = (f"one-sided p {format_p(p)} on the claimed side (Holm {format_p(p_adj)}), {format_p(q)} on the other "
             f"(Holm {format_p(q_adj)}) in family {d.family} ({hypotheses} hypotheses"
             + (f": {members}" if members else "") + f"; α {alpha:g})" + holm_note)
    if not math.isfinite(mde):
        power = ("MDE unknown (no group differs)" if math.isnan(mde) else
                 f"no effect these differing groups allow gives 80% power ({mde_test})")
    else:
        power = f"MDE {mde:.{digits}f} {t.unit} ({mde_test})"
    if t.guarded:
        tests += (f"; only {t.differing_groups} {t.units} differ (< {MIN_DIFFERING}), so the bound-aware test decides "
                  "too (a rare loss of a whole unit could balance their sum)")
    sample = sample_size(t.n, t.n_groups, t.differing_groups, t.discordant, d.kind, t.units)
    if status in ("holds", "fails"):
        return f"{status}: {tests}; {power}; {sample}"
    more = (f"; about {int(needed):,} directions would give 80% power at the observed {t.effect:+.{digits}f} {t.unit} "
            f"({mde_test})" if math.isfinite(needed) else "")
    return f"inconclusive: {tests}; {power} at {sample}{more}"


def power_numbers(t: ClaimTest, level: float, power: float = POWER) -> tuple[float, float, str]:
    """(MDE, directions needed, the test they are for) of a measured claim at one-sided ``level``.

    A comparison's are the decision test's own, simulated on its sample (``reports.power``); H3's (no design) are
    the normal limit of its sign-flip statistic, and say so."""
    normal = minimum_detectable_effect(t.null_sd, level, power)
    normal_needed = directions_needed(t.n, normal, t.effect)
    if t.design is None or power != POWER:
        return normal, normal_needed, "sign-flip statistic, normal limit"
    mde = decision_mde(t.design, level)
    needed = decision_directions_needed(t.design, t.effect, level, normal=normal_needed) \
        if math.isfinite(t.effect) and not math.isnan(mde) else float("nan")
    label = f"{DECISION_TEST} at one-sided level {level:.3g}"
    if t.anytime:
        label += " on a fixed sample of these groups (the anytime-valid test's own: python -m harness.plan)"
    return mde, needed, label


def decide_family(tests: Sequence[ClaimTest], unmeasured: int = 0, alpha: float = ALPHA,
                  power: float = POWER, bound=kept_bound, numbers=power_numbers) -> list[ClaimResult]:
    """Verdicts of one family's claims (see the module doc), in the order given, each with its decision interval.

    ``unmeasured`` counts the family's decidable claims not measured in this run (deselected
    or skipped): each enters Holm as two hypotheses with p = 1, so the family stays the
    declared one and a partial run is never more decisive than a full one. ``bound`` locates a kept side's end of a
    decision interval (``reports.decision_intervals.kept_bound``, or a memoized twin of it); ``numbers`` gives a
    claim's MDE and directions needed (``power_numbers``, or a memoized twin: simulating the decision test is most of
    a warm run's claim time).
    """
    families = {t.definition.family for t in tests}
    if len(families) > 1:
        raise ValueError(f"decide_family takes one family at a time; got {sorted(families)}")
    if unmeasured < 0:
        raise ValueError(f"unmeasured must be >= 0; got {unmeasured}")
    usable = [smallest_claim_p(t) <= alpha / 2 for t in tests]
    claimed = [1.0 if math.isnan(t.p_claimed) or t.flag else t.p_claimed for t, ok in zip(tests, usable) if ok]
    opposite = [1.0 if math.isnan(t.p_opposite) or t.flag else t.p_opposite for t, ok in zip(tests, usable) if ok]
    m = len(claimed) + unmeasured
    adjusted = holm([*claimed, *opposite, *[1.0] * (2 * unmeasured)])
    level = alpha / (2 * m) if m else float("nan")
    # Holm's simultaneous bounds: the sides it keeps are inverted at α / (hypotheses it keeps) (decision_intervals).
    kept_level = alpha / max(1, int((adjusted > alpha).sum()))
    members = family_members([t.definition.name for t, ok in zip(tests, usable) if ok], unmeasured)
    out: list[ClaimResult] = []
    k = 0
    for t, ok in zip(tests, usable):
        nan = float("nan")
        p, q, p_adj, q_adj = (t.p_claimed, t.p_opposite, adjusted[k], adjusted[len(claimed) + k]) if ok \
            else (nan, nan, nan, nan)
        k += ok
        status: Status = "holds" if p_adj <= alpha else "fails" if q_adj <= alpha else "inconclusive"
        mde, needed, mde_test = numbers(t, level, power) if ok else (nan, nan, "")
        decided = ok and not t.flag and not math.isnan(t.effect)
        decision = holm_interval(t.shifted if decided else None, t.definition.side, p_adj <= alpha, q_adj <= alpha,
                                 kept_level, bound)
        out.append(ClaimResult(t.definition, status, t.effect, t.lo, t.hi, t.unit, p, p_adj, q, q_adj, mde, level,
                               needed, t.n, t.n_groups, 2 * m, _reason(t, status, p, p_adj, q, q_adj, 2 * m, mde,
                                                                       needed, alpha, mde_test, members),
                               t.measured, alpha, t.differing_groups, t.discordant, mde_test, members, t, decision))
    return out


def family_members(names: Sequence[str], unmeasured: int = 0) -> str:
    """The claims a family's Holm counts, by name ("a, b and 1 not measured here"): shown beside every Holm p, so two
    runs' different adjustments of the same p say why."""
    text = f"{len(names) + unmeasured} claim{'' if len(names) + unmeasured == 1 else 's'}"
    listed = ", ".join(names)
    more = f"{unmeasured} not measured here" if unmeasured else ""
    return f"{text}: {' and '.join(x for x in (listed, more) if x)}" if listed or more else text


def robust_to_noise(exact: ClaimResult, noisy: ClaimResult, noise: str) -> ClaimResult:
    """A claim about trained rankers, decisive only where the models retrained on noisy inputs decide it the same way
    (docs/statistics.md#perturbation).

    Each side's adjusted p is the larger of the two Holm-adjusted p's, so the claim holds (fails) only when both
    families reject on that side; the rejections are a subset of the exact family's, whose family-wise error they keep.
    Effect, interval, raw p and power stay the exact inputs' (the paper's protocol); ``noise`` names the perturbation.
    The reason quotes the published (larger) Holm p's, the one pair every table shows, and both families' beside.
    """
    if math.isnan(exact.p_adjusted) or math.isnan(noisy.p_adjusted):
        return exact
    p_adj, q_adj = max(exact.p_adjusted, noisy.p_adjusted), max(exact.p_opposite_adjusted, noisy.p_opposite_adjusted)
    status: Status = "holds" if p_adj <= exact.alpha else "fails" if q_adj <= exact.alpha else "inconclusive"
    seen = (f"retrained on {noise}: {noisy.status} (Holm {format_p(noisy.p_adjusted)} on the claimed side, "
            f"{format_p(noisy.p_opposite_adjusted)} on the other)")
    note = (f" (each Holm p the larger of the exact inputs' {format_p(exact.p_adjusted)} / "
            f"{format_p(exact.p_opposite_adjusted)} and the retrained models' {format_p(noisy.p_adjusted)} / "
            f"{format_p(noisy.p_opposite_adjusted)})")
    published = exact.reason if exact.test is None else _reason(
        exact.test, status, exact.p_value, p_adj, exact.p_opposite, q_adj, exact.family_hypotheses, exact.mde,
        exact.directions_needed, exact.alpha, exact.mde_test, exact.family_members, note)
    reason = published if noisy.status == exact.status else (
        f"inconclusive: {exact.status} on the exact inputs but {seen}, so the verdict hinges on floating-point noise; "
        f"published: {published}")
    # Decisive only where both families are: the interval is what either keeps (their hull).
    return replace(exact, status=status, p_adjusted=p_adj, p_opposite_adjusted=q_adj, reason=reason,
                   measured=f"{exact.measured}; {seen}" if exact.measured else seen,
                   decision=exact.decision.hull(noisy.decision))
