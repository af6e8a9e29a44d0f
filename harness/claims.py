"""Every claim of the session's profile, measured on this run's outcomes and decided family by family.

What a claim is, how it is measured and how its family decides it live in ``reports.claim_families``,
``reports.claim_measures`` and ``reports.hypotheses``; this module gathers each claim's outcomes from the session and
decides them (docs/statistics.md#claims); ``harness.checks`` turns the verdicts into pytest outcomes:

- a family is decided as a whole, once per run (``ClaimBook``): each claim's part reads its
  own verdict from it. Claims of the family that this run does not measure (their rankers
  deselected, or not runnable on this machine) count as untested (p = 1): the family stays the
  declared one, and a partial run is never more decisive than a full one;
- a claim whose ranker runs on a sequential sample is decided by its anytime-valid p-values at the
  sample's stop (``harness.sequential``; docs/statistics.md#sequential-samples), in the same Holm.
"""
from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Callable

import numpy as np
import pandas as pd

from fixtures.code import code_identity
from fixtures.populations import eligible_directions
from harness.memo import content, per_instance
from harness.options import OptionError
from harness.profile_records import Profile
from harness.profile_terms import PROFILE_DIR
from rankers.declarations import ALL
from rankers.window import WINDOW_K
from reports import claim_families
from reports.claim_families import ClaimDefinition, DeclaredComparison, seed_words
from reports.claim_measures import ClaimTest, measure_comparison, measure_tie_branch, not_measured
from reports.decision_intervals import ShiftedTest, kept_bound
from reports.hypotheses import DIGITS, ClaimResult, decidable, decide_family, format_interval, power_numbers
from reports.tie_branch import expected_grade_splits, tie_branches

# ``ev: Evaluation`` below is the session (harness.session), passed in and never imported: the session runs
# sequential samples (harness.sequential), which read the claims defined here.

# ---- the claims a profile implies --------------------------------------------------------------------------------

def same_scorer(a, b) -> bool:
    return claim_families.same_scorer(a, b)


def h2_claims(profile: Profile) -> dict[str, tuple[str, str, str]]:
    """H2 claims of the profile's window rankers and of the full-pool rankers its user declares (a TREC run, a
    factory) -> (ranker, versus, measure)."""
    return claim_families.h2_claims(profile.ordered(), _shipped(profile, "rankers"))


def h3_claims(profile: Profile) -> dict[str, str]:
    """H3 claims of the profile's argmax rankers on a bounded grade scale -> ranker."""
    return claim_families.h3_claims(profile.window_rankers())


def tie_twins(profile: Profile) -> dict[str, tuple[str, str]]:
    """H3x claims -> (expected-grade ranker, argmax twin)."""
    return claim_families.tie_twins(profile.window_rankers())


def designated_twins(profile: Profile) -> dict[str, tuple[str, str]]:
    """Designated-pair rankers and their fully windowed twins: id -> (designated, window)."""
    return claim_families.designated_twins(profile.window_rankers())


def _shipped(profile: Profile, table: str) -> frozenset[str]:
    """Names a shipped profile (specs/profiles/*.toml) in the profile's extends chain declares under ``[table]``."""
    names: set[str] = set()
    for path in profile.chain:
        if path.parent.resolve() == PROFILE_DIR.resolve():
            names |= set(tomllib.loads(path.read_text(encoding="utf-8")).get(table, {}))
    return frozenset(names)


def definitions(profile: Profile) -> dict[str, ClaimDefinition]:
    """Every claim of the profile in its family: the study's families for what the shipped profiles declare,
    one family per ranker for a user's own (docs/statistics.md#families)."""
    shipped_claims = _shipped(profile, "claims")
    comparisons = [DeclaredComparison(c.name, c.family, c.ranker, c.versus, c.measure, c.direction,
                                      c.name in shipped_claims) for c in profile.comparisons()]
    return claim_families.claim_definitions(comparisons, profile.ordered(), _shipped(profile, "rankers"))


def check_claim_names(profile: Profile) -> None:
    """Every claim the profile states an expectation for must be one the specs measure."""
    known = set(definitions(profile))
    for name in profile.claims:
        base = name.split("@", 1)[0]
        if base not in known:
            raise OptionError(f"--profile: {profile.path} [claims.{name}]: no spec measures a claim named "
                                    f"{base!r} for the declared rankers; known claims: {sorted(known)}")


# ---- measuring and deciding ----------------------------------------------------------------------------------------

def tie_branch_frame(ev: Evaluation, split: str, name: str) -> pd.DataFrame:
    """A window ranker's directions by branch (equal / different text score / outside the window or fallback),
    computed once per session and sample: each H3 claim and its tables read the same frame, and each look of a
    sequential sample (a view sharing the session's objects) its own."""
    population = ev.decl(name).population
    drawn = () if population == ALL else ev.sample(split, population)
    return ev.shared(("tie-branch", split, name, drawn), lambda: _tie_branch_frame(ev, split, name)).copy()


def _tie_branch_frame(ev: Evaluation, split: str, name: str) -> pd.DataFrame:
    decl = ev.decl(name)
    outcomes = ev.outcomes(split, name)
    return tie_branches(eligible_directions(ev.directions_for(split, name)), outcomes,
                        ev.ranking(split, decl.reference).frame, ev.window_scores(split, name),
                        frozenset(outcomes.loc[outcomes["fallback"], "qid"]), k=WINDOW_K)


def expected_grade_counts(ev: Evaluation, split: str, expected: str, argmax: str) -> tuple[pd.DataFrame, dict]:
    """The argmax twin's branches and what the expected grade does with its equal-grade directions."""
    per = tie_branch_frame(ev, split, argmax)
    q = eligible_directions(ev.directions_for(split, argmax)).set_index("qid").loc[per["qid"]]
    scores = ev.window_scores(split, expected)
    e_pos = np.array([scores.get((a, b), np.nan) for a, b in zip(per["qid"], q["preferred_pid"])])
    e_neg = np.array([scores.get((a, b), np.nan) for a, b in zip(per["qid"], q["counterpart_pid"])])
    return per, expected_grade_splits(per, e_pos, e_neg)


def _groups(ev: Evaluation, split: str, name: str, qids=None) -> np.ndarray:
    q = eligible_directions(ev.directions_for(split, name)).set_index("qid")
    return q["group"].to_numpy() if qids is None else q.loc[list(qids), "group"].to_numpy()


def seeded(ev: Evaluation, d: ClaimDefinition) -> bool:
    """A comparison about a training procedure: its ranker or its versus is trained with several seeds."""
    return d.kind == "comparison" and any(len(ev.seeds(name)) > 1 for name in (d.ranker, d.versus) if name)


def seed_estimand(ev: Evaluation, d: ClaimDefinition) -> str:
    """claims.csv's ``seeds`` (and ``estimand``) of a seed-averaged comparison, in the words every output uses
    (``reports.claim_families.seed_words``: ``mean of seeds 13–17``); "" for the others (one ranking per ranker)."""
    if not seeded(ev, d):
        return ""
    return seed_words({s for name in (d.ranker, d.versus) if name for s in ev.seeds(name)})


def claim_units(ev: Evaluation, d: ClaimDefinition) -> str:
    """The units a claim's sample drew (``fixtures.samples.DESIGNS``): its ranker's sample design, source groups on
    the full population."""
    population = ev.decl(d.ranker).population
    return "groups" if population == ALL else ev.design(population)


def sample_estimand(ev: Evaluation, d: ClaimDefinition) -> str:
    """claims.csv's ``estimand`` of a claim decided on a sample of complete pairs or single directions ("" on whole
    groups): the rate over the split's eligible directions themselves, each sampled unit independent
    (docs/statistics.md#designs)."""
    units = claim_units(ev, d)
    if units == "groups":
        return ""
    drawn = "complete pairs, one pair a unit" if units == "pairs" else "single directions, one a unit"
    return (f"rate over this split's eligible directions (finite population): simple random sample "
            f"{ev.decl(d.ranker).population!r} of {drawn}")


def seed_note(ev: Evaluation, d: ClaimDefinition, single_seed: bool) -> str:
    """What a comparison's outcomes are: the seed average (its estimand) or the run's single seed."""
    if single_seed:
        return (f"{seed_words([ev.settings.seed])} (the paper's protocol), reported beside the verdict on the "
                f"{seed_estimand(ev, d)}")
    trained = ", ".join(n for n in (d.ranker, d.versus) if n and len(ev.seeds(n)) > 1)
    return f"each direction's outcome the {seed_estimand(ev, d)} ({trained})"


def _tested(ev: Evaluation, d: ClaimDefinition, test: Callable[..., ClaimTest], *args: object) -> ClaimTest:
    """``test(d, *args)``, memoized under the claim, the contents of its inputs and the code of the tests
    (docs/protocol.md#caches): a warm run reads a claim's intervals and p-values instead of resampling them."""
    parts = {"claim": dataclasses.asdict(d), "test": test.__name__, "inputs": [content(a) for a in args],
             **code_identity(test.__module__)}
    return ev.memo.get("claim-test", parts, lambda: test(d, *args))


def memo_bound(ev: Evaluation) -> Callable[[ShiftedTest, str, float], float]:
    """``reports.decision_intervals.kept_bound`` memoized under the test, the side, the level and the code
    (docs/protocol.md#caches): a warm run reads its decision intervals instead of inverting the tests again."""
    def bound(test: ShiftedTest, side: str, level: float) -> float:
        parts = {"test": dataclasses.asdict(test), "side": side, "level": level,
                 **code_identity(kept_bound.__module__)}
        return ev.memo.get("decision-bound", parts, lambda: kept_bound(test, side, level))
    return bound


def memo_numbers(ev: Evaluation) -> Callable[[ClaimTest, float, float], tuple[float, float, str]]:
    """``reports.hypotheses.power_numbers`` memoized under everything it reads (the claim's design, null SD, n,
    effect and sampling, the level and power) and the code: a warm run reads each claim's MDE instead of simulating
    the decision test again (docs/protocol.md#caches)."""
    def numbers(t: ClaimTest, level: float, power: float) -> tuple[float, float, str]:
        parts = {"design": None if t.design is None else dataclasses.asdict(t.design), "null_sd": t.null_sd,
                 "n": t.n, "effect": t.effect, "anytime": t.anytime, "level": level, "power": power,
                 **code_identity(power_numbers.__module__)}
        return ev.memo.get("power-numbers", parts, lambda: power_numbers(t, level, power))
    return numbers


def measure(ev: Evaluation, split: str, d: ClaimDefinition, single_seed: bool = False) -> ClaimTest:
    """One claim measured on this run's outcomes; a comparison of seeded rankers on their seed-averaged
    outcomes unless ``single_seed`` (docs/statistics.md#seeds)."""
    return dataclasses.replace(_measure(ev, split, d, single_seed), units=claim_units(ev, d))


def _measure(ev: Evaluation, split: str, d: ClaimDefinition, single_seed: bool) -> ClaimTest:
    seed = ev.settings.seed
    if d.kind == "tie_branch":
        per = tie_branch_frame(ev, split, d.ranker)
        return _tested(ev, d, measure_tie_branch, per, _groups(ev, split, d.ranker, per["qid"]), seed)
    if d.kind == "tie_resolution":  # H3x: on the argmax twin's equal-grade directions
        per, counts = expected_grade_counts(ev, split, d.ranker, d.versus)
        tied = per.loc[per["branch"] == "equal_score", "qid"]
        note = (f"{len(tied)} equal-grade directions of {d.versus}: the expected grade splits {counts['split']}, "
                f"right on {counts['split_right']} (the tie-break right on {counts['fusion_right_on_split']} of them)")
        return _tested(ev, d, measure_comparison, ev.outcomes_on(split, d.ranker, tied),
                       ev.outcomes_on(split, d.versus, tied), ev.directions_for(split, d.versus), seed, note)
    averaged = not single_seed and seeded(ev, d)
    first = ev.averaged_outcomes(split, d.ranker) if averaged else ev.outcomes(split, d.ranker)
    return _tested(ev, d, measure_comparison, first, ev.outcomes_on(split, d.versus, first["qid"], averaged=averaged),
                   ev.directions_for(split, d.ranker), seed, seed_note(ev, d, single_seed) if seeded(ev, d) else "")


def anytime(ev: Evaluation, split: str, d: ClaimDefinition, test: ClaimTest) -> ClaimTest:
    """A claim on a sequential sample tested by its anytime-valid p-values at the stop (valid however often the
    sample looked), its interval the confidence sequence there (the bootstrap interval under-covers at a
    data-dependent stop), its effect unchanged; a claim without such a test is left undecided."""
    sample = ev.profile.sequential_sample((d.ranker, d.versus))
    if sample is None:
        return test
    run = ev.sequential(split, sample)
    if d.name in run.untested:
        return dataclasses.replace(not_measured(d, run.untested[d.name], test.unit, test.n, test.n_groups),
                                   units=test.units)
    p_greater, p_less = run.p_values(d.name)
    sequence = run.tests[d.name]
    note = (f"{run.note(d.name)}; the descriptive interval shown is that 95% confidence sequence, valid at this "
            f"data-dependent stop (the fixed-sample bootstrap interval "
            f"{format_interval(test.lo, test.hi, DIGITS.get(test.unit, 4))} is not)")
    shifted = None
    if test.shifted is not None and sequence.sums:  # the decision interval inverts the betting test at the stop
        shifted = ShiftedTest(sequence.sums, sequence.sizes, sequence.scale / sum(sequence.sizes), 1.0,
                              sequence.bound, False, test.shifted.resolution, anytime=True)
    return dataclasses.replace(test, p_greater=p_greater, p_less=p_less, lo=sequence.lo, hi=sequence.hi,
                               bootstrap=(test.lo, test.hi), anytime=True, shifted=shifted,
                               measured=f"{test.measured}; {note}" if test.measured else note)


class ClaimBook:
    """Every claim of the session's profile, decided family by family on first use (see the module doc)."""

    def __init__(self, ev: Evaluation, selected: frozenset[tuple[str, str]] | None) -> None:
        self.ev = ev
        self.definitions = definitions(ev.profile)
        self.selected = selected

    def measured_here(self, split: str, name: str) -> bool:
        return self.selected is None or (split, name) in self.selected

    def _decidable_by_design(self, split: str, d: ClaimDefinition) -> bool:
        """An unmeasured claim's sample decides it or not by its groups alone (H3x: at most its twin's)."""
        owner = d.versus if d.kind == "tie_resolution" else d.ranker
        sizes = pd.Series(_groups(self.ev, split, owner)).value_counts().to_numpy()
        return decidable(sizes, guarded=d.kind != "tie_branch")

    @per_instance
    def family(self, split: str, family: str, single_seed: bool = False) -> dict[str, ClaimResult | BaseException]:
        """Every claim of the family decided together; a member whose ranker cannot be computed keeps its error
        (its own spec fails with it) and counts as untested, so the other members are still decided.
        ``single_seed``: the same family on the run's seed alone (reported, never asserted)."""
        tests, errors, unmeasured = [], {}, 0
        for d in (d for d in self.definitions.values() if d.family == family):
            if not self.measured_here(split, d.name):
                unmeasured += self._decidable_by_design(split, d)
                continue
            try:
                tests.append(anytime(self.ev, split, d, measure(self.ev, split, d, single_seed)))
            except Exception as exc:  # noqa: BLE001 - a broken ranker: its own claims only
                errors[d.name] = exc
                unmeasured += 1
        return {**errors, **{r.name: r for r in decide_family(tests, unmeasured, bound=memo_bound(self.ev),
                                                                       numbers=memo_numbers(self.ev))}}

    def result(self, split: str, name: str) -> ClaimResult:
        if name not in self.definitions:
            raise KeyError(f"no claim named {name!r} in profile {self.ev.profile.path}; known: {sorted(self.definitions)}")
        return self._decided(split, name, single_seed=False)

    def _decided(self, split: str, name: str, single_seed: bool) -> ClaimResult:
        """The claim's verdict from its family, or the error that kept its ranker from being measured."""
        outcome = self.family(split, self.definitions[name].family, single_seed)[name]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def single_seed_result(self, split: str, name: str) -> ClaimResult | None:
        """The claim decided on the run's seed alone, in its family decided the same way; None when no ranker
        of the claim is trained with several seeds (then the two are one)."""
        d = self.definitions[name]
        if not seeded(self.ev, d):
            return None
        return self._decided(split, name, single_seed=True)

