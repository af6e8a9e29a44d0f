"""Claims, gates and pins: every row for the record, and the checks only reviewed, decisive expectations assert.

The verdicts come from the session's claim book (``harness.claims``); this module makes each one's claims-table row
and the ``Check``s it implies, which the run record keeps and the specs turn into pytest outcomes
(docs/statistics.md#claims):

- the row for the claims table is always recorded; a decisive result that contradicts the
  profile's reviewed expectation fails the test with old and new; an expected failure that
  still fails is an xfail carrying the numbers; an inconclusive claim is reported with its
  numbers and n and never asserted or expected-failed; on a subset run a full-run ``expect``
  the subset leaves undecided is reported as not decidable on this subset
  (docs/statistics.md#expectations), unless ``--gate-expectations``: then the subset gate fails it when the saved
  full run of the profile recorded another verdict, or when its interval lies wholly beyond the non-inferiority
  margin against it; one whose measure no interval can gate, with no saved full run, is said before any work
  (``subset_notice``) and reported as not gateable (docs/statistics.md#subset-gate);
- a pin fails the run only when its value *changed* beyond its margin (docs/statistics.md#pins), a gate when a
  measured value is past its limit (docs/statistics.md#gates);
- expectations, gates and pins fail only the runs of the profile whose file declares them (or with
  ``inherit_checks``); an inherited one that is not met is recorded and warned about, never failed
  (docs/statistics.md#inherited-checks).
"""
from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from fixtures.datasets.study import build_dataset_study
from fixtures.settings import Settings
from harness.claims import definitions
from harness.profile_file import shown
from harness.profile_records import Expectation, Gate, Pin, Profile
from harness.profile_terms import PROFILE_DIR
from harness.sequential import family_sizes
from reports.comparisons import group_labels
from reports.changes import ChangeVerdict, paired_change, tolerance_change
from reports.claim_families import seed_words
from reports.columns import POINTS
from reports.history import HISTORY, MANIFEST_FILE, SavedSplit, UnsealedEntry, open_saved, reviewed_run, saved_runs
from reports.hypotheses import ClaimResult, check_verdict
from reports.measures import paired_measure
from reports.outcome_models import directions_to_decide
from reports.record import profile_of
from reports.run_record import Check
from reports.stats import ALPHA

# ``ev: Evaluation`` below is the session (harness.session), passed in and never imported.


class InconclusiveClaim(UserWarning):
    """A claim the profile reviewed as decisive that is now inconclusive."""


class UndeterminedPin(UserWarning):
    """A pinned value that neither changed nor is shown unchanged within its margin: review it."""


class NotDecidableOnSubset(UserWarning):
    """A full-run expectation that this subset run cannot decide: not checked here (docs/statistics.md#expectations)."""


class InheritedCheckMissed(UserWarning):
    """An expectation, gate or pin the run's profile inherits that this run does not meet: reported, not failed
    (docs/statistics.md#inherited-checks)."""


#: claims.csv's ``check``: what became of a row's expectation, gate or pin ("" when the row asserts nothing).
MET, MISSED, UNDECIDED, NOT_DECIDABLE = "met", "missed", "undecided", "not decidable on this subset"
CONTRADICTED = "contradicted on this subset"
#: The subset gate's other outcomes (docs/statistics.md#subset-gate): the saved full run of the profile recorded
#: another verdict than the expectation; or the interval cannot gate the claim's measure and no full run is recorded.
AGAINST_FULL_RUN, NOT_GATEABLE = "contradicted by the full run", "not gateable on this subset"
#: Claim measures the subset gate's interval cannot gate: on the frozen pools' fusion ranks a random window reranker's
#: strict preference is fusion's within about 2 points, far inside any interval 12 groups give, so the interval caught
#: its "holds" in under 1% of simulated CI subsets (docs/statistics.md#subset-gate; tests/reports/test_subset_gate_real.py).
INTERVAL_BLIND = frozenset({"strict"})
#: The subset gate's non-inferiority margin, a share of the measure's range (10 points of a rate, 0.10 of MRR):
#: chosen by simulation on the CI subset's design (docs/statistics.md#subset-gate).
SUBSET_MARGIN = 0.10


def single_seed_row(ev: Evaluation, result: ClaimResult) -> dict:
    """The single-seed twin of a seed-averaged claim as its own claims row (``<claim>@seed<k>``), never asserted."""
    row = result.row()
    check_verdict(row["status"], row["p_adjusted"], row["p_opposite_adjusted"], result.alpha, result.name)
    seed = seed_words([ev.settings.seed])
    return {**row, "claim": f"{result.name}@seed{ev.settings.seed}", "seeds": seed,
            "estimand": f"{seed} (the paper's protocol)",
            "expected": "", "profile": ev.profile.name, "scope": "subset" if ev.is_subset else "full",
            **declaration(ev.profile, None, "")}


def declaration(profile: Profile, declared_in: Path | None, check: str) -> dict[str, str]:
    """claims.csv's columns naming who declared a row's check (``declared`` by the run's own file or ``inherited``)
    and what became of it."""
    if declared_in is None:
        return {"declaration": "", "declared_in": "", "check": ""}
    return {"declaration": "declared" if profile.declares(declared_in) else "inherited",
            "declared_in": shown(declared_in), "check": check}


def not_gating(profile: Profile, declared_in: Path) -> str:
    """Why a check that is not met passes: it is inherited (docs/statistics.md#inherited-checks)."""
    return (f"; inherited from {shown(declared_in)}, so reported, not failed: the run of {profile.path.name} fails "
            "only on what it declares (set [profile] inherit_checks = true to fail on inherited checks too)")


def expectation_check(status: str, expectation: Expectation | None, subset: bool) -> str:
    """What a verdict makes of the expectation it is checked against (docs/statistics.md#expectations)."""
    if expectation is None:
        return ""
    if status == "inconclusive":
        return NOT_DECIDABLE if subset and expectation.scope == "full" else UNDECIDED
    return MET if status == expectation.expect else MISSED


def subset_margin(unit: str) -> float:
    """The subset gate's margin in a claim's unit (points of a rate, else the mean measure's own unit)."""
    return SUBSET_MARGIN * (100.0 if unit == POINTS else 1.0)


def contradicts(result: ClaimResult, expected: str) -> bool:
    """The subset gate (docs/statistics.md#subset-gate): the claim's bootstrap interval lies wholly beyond the
    non-inferiority margin on the side opposite to what the expectation says of its effect."""
    lo, hi = result.bootstrap_interval
    margin = subset_margin(result.unit)
    positive = (result.definition.side == ">") == (expected == "holds")
    return hi < -margin if positive else lo > margin


@dataclass(frozen=True)
class RecordedVerdict:
    """A claim's verdict as a saved full run of the profile recorded it (its claims.csv in ``results/.history``)."""

    status: str
    run_id: str
    effect: float = math.nan
    p_adjusted: float = math.nan

    def summary(self) -> str:
        return (f"the full run {self.run_id} recorded {self.status!r} (effect {self.effect:+.4g}, "
                f"Holm p {self.p_adjusted:.2g})")


def recorded_verdict(results_dir: Path, profile: str, split: str, claim: str) -> RecordedVerdict | None:
    """The claim's verdict on ``split`` in the newest saved full-scope run of ``profile`` that holds it; None when
    the history holds none. A partial run (``-m``, ``-k``) counts only where it decided the claim: it is never more
    decisive than the complete run (docs/statistics.md#decisions), so its *inconclusive* says nothing. A candidate's
    files are checked against their sealed digests first (``open_saved``): an edited one is refused, naming it,
    never read; one not sealed with this user's key is passed over."""
    history = Path(results_dir) / HISTORY
    for run in reversed(saved_runs(results_dir)):
        folder = history / run / split
        if not (folder / MANIFEST_FILE).is_file() or not (folder / "claims.csv").is_file():
            continue
        try:
            manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # cannot be shown to be this profile's full run
        if not isinstance(manifest, dict) or manifest.get("scope") != "full" \
                or profile_of(manifest).get("name") != profile:
            continue
        try:
            saved = open_saved(history / run, split)
        except UnsealedEntry:
            continue  # not sealed with this user's key: never the verdict a gate holds
        table = pd.read_csv(saved.folder / "claims.csv", dtype={"claim": str, "status": str})
        rows = table[(table["claim"] == claim)
                     & (table["status"].isin(["holds", "fails"]) | (not manifest.get("partial")))]
        if len(rows):
            row = rows.iloc[0]
            return RecordedVerdict(row["status"], run, *(float(row[c]) if c in row and pd.notna(row[c]) else math.nan
                                                         for c in ("effect", "p_adjusted")))
    return None


def full_run_verdict(ev: Evaluation, split: str, claim: str) -> RecordedVerdict | None:
    """The verdict the subset gate holds a subset run's expectation to: the profile's saved full run's
    (docs/statistics.md#subset-gate); looked up on a gated subset run only, once per claim."""
    if not (ev.is_subset and ev.settings.gate_expectations):
        return None
    return ev.shared(("full-run-verdict", split, claim), lambda: recorded_verdict(
        ev.settings.results_dir, ev.profile.name, split, claim))


def interval_blind(expectation: Expectation, measure: str) -> bool:
    """A user's expectation on a measure no subset interval can gate (a shipped profile's are reviewed on the
    project's full runs: docs/reference-results.md)."""
    shipped = Path(expectation.declared_in).resolve().parent == PROFILE_DIR.resolve()
    return measure in INTERVAL_BLIND and not shipped


def subset_gate(result: ClaimResult, expectation: Expectation, recorded: RecordedVerdict | None) -> str:
    """What the subset gate makes of a full-run expectation the subset leaves undecided
    (docs/statistics.md#subset-gate): against the saved full run's verdict when it differs; contradicted when the
    interval lies beyond the margin against it; not gateable (a warning, said before the run's work:
    ``subset_notice``) when the interval is blind to the claim's measure and no full run is saved; else not
    decidable (a warning)."""
    if recorded is not None and recorded.status != expectation.expect:
        return AGAINST_FULL_RUN
    if contradicts(result, expectation.expect):
        return CONTRADICTED
    if recorded is None and interval_blind(expectation, result.definition.measure):
        return NOT_GATEABLE
    return NOT_DECIDABLE


def subset_notice(settings: Settings, profile: Profile) -> list[str]:
    """Said once, before any work (both entry points print it after ``resolve_before_work``), on a subset run under
    ``--gate-expectations`` (docs/statistics.md#subset-gate):
    the user's full-run expectations on a measure no subset interval can gate whose verdict no saved full run of the
    profile records (the gate cannot hold them: they are reported, not gated), and what would gate each: a saved
    full run, or a subset large enough to decide a change of the subset margin under every outcome model of the plan
    (``reports.outcome_models.directions_to_decide``, at the claim's Holm first-step level)."""
    if not (settings.subset_pairs and settings.gate_expectations):
        return []
    families, lines = family_sizes(profile), []
    study = functools.cache(lambda: build_dataset_study(profile.data, settings.data_dir))
    for name, definition in definitions(profile).items():
        for split in settings.splits:
            declared = profile.claim(name, split)
            expectation = declared.expectation(True) if declared is not None else None
            if expectation is None or expectation.scope != "full" or not interval_blind(expectation, definition.measure) \
                    or recorded_verdict(settings.results_dir, profile.name, split, name) is not None:
                continue
            sizes = study().split(split).groupby("group").size()
            needed = directions_to_decide(tuple(sizes.tolist()), ALPHA / families.get(definition.family, 2),
                                          SUBSET_MARGIN)
            pairs = (f", or a subset of about {math.ceil(needed / 2)} pairs (--subset-pairs {math.ceil(needed / 2)})"
                     if needed else f" (not even all {len(sizes)} groups of {split} decide it in 80% of samples)")
            lines.append(f"  [{split}] {name}: {shown(expectation.declared_in)} expects {expectation.expect!r}; what "
                         f"would gate it: a saved full run{pairs}")
    if not lines:
        return []
    return [f"--gate-expectations: this {settings.subset_pairs}-pair subset cannot decide these expectations, no "
            f"interval on it can gate their measure, and no full run of {profile.name} saved in "
            f"{settings.results_dir} records their verdict: they are reported as not gateable, not gated "
            "(docs/statistics.md#subset-gate).", *lines,
            f"  A saved full run: README command 1 with --results-dir {settings.results_dir}, whose verdict the gate "
            f"then holds. A subset of the pairs named decides a {subset_margin(POINTS):g}-point change of strict "
            "preference in 80% of subsets under every outcome model of python -m harness.plan."]


def claim_check(profile: Profile, split: str, result: ClaimResult, subset: bool, estimand: str = "",
                gate: bool = False, recorded: RecordedVerdict | None = None) -> tuple[dict, tuple[Check, ...]]:
    """The claim's row, and what the profile's reviewed expectation makes of it (``gate``: a reviewed expectation
    the run leaves inconclusive fails instead of warning; on a subset, the subset gate decides, holding the saved
    full run's verdict ``recorded``). Only the expectations the run's own profile file declares (or all, with
    ``inherit_checks``) can fail it."""
    declared = profile.claim(result.name, split)
    expectation = declared.expectation(subset) if declared is not None else None
    expected = expectation.expect if expectation is not None else ""
    row = result.row()
    check_verdict(row["status"], row["p_adjusted"], row["p_opposite_adjusted"], result.alpha, result.name)
    check = expectation_check(result.status, expectation, subset)
    if check == NOT_DECIDABLE and gate:
        check = subset_gate(result, expectation, recorded)
    row = {**row, "estimand": estimand, "expected": expected, "profile": profile.name,
           "scope": "subset" if subset else "full",
           **declaration(profile, expectation and expectation.declared_in, check)}
    if expectation is None:
        return row, ()  # reported, not asserted: no reviewed expectation for this claim
    where = f"[{profile.name}{' subset' if subset else ''} / {split}] {result.name}"
    source = shown(expectation.declared_in)
    enforced = profile.enforces(expectation.declared_in)
    if check == NOT_GATEABLE:  # said before the run's work (``subset_notice``), with what would gate it
        return row, (Check("warn", f"{where}: {source} expects {expected!r} (reviewed on the full run); this subset "
                                   f"cannot decide it, no interval on it can gate {result.definition.measure} and no "
                                   "full run is saved: not gated (docs/statistics.md#subset-gate; what would gate it "
                                   f"was said before the run's work): {result.summary()}", NotDecidableOnSubset),)
    if check in (CONTRADICTED, AGAINST_FULL_RUN):  # the subset gate fails it (declared) or warns
        if check == CONTRADICTED:
            message = (f"{where}: {source} expects {expected!r} (reviewed on the full run); not decidable on this "
                       f"subset, but its interval lies wholly beyond the {subset_margin(result.unit):g} {result.unit} "
                       f"non-inferiority margin against it (the subset gate, docs/statistics.md#subset-gate): "
                       f"{result.summary()}")
        else:
            message = (f"{where}: {source} expects {expected!r}, but {recorded.summary()}; this subset cannot decide "
                       f"it, and the subset gate holds the full run's verdict (docs/statistics.md#subset-gate): "
                       f"{result.summary()}")
        if enforced:
            return row, (Check("fail", f"{message}; review {source}"),)
        return row, (Check("warn", message + not_gating(profile, expectation.declared_in), InheritedCheckMissed),)
    if check == NOT_DECIDABLE:
        held = f"; {recorded.summary()}, which the subset gate holds" if recorded is not None else ""
        return row, (Check("warn", f"{where}: {source} expects {expected!r} (reviewed on the full run), not decidable "
                                   f"on this subset{held}: {result.summary()}", NotDecidableOnSubset),)
    if check == UNDECIDED:
        message = f"{where} was reviewed as {expected!r} but is now inconclusive: {result.summary()} ({source})"
        if gate and enforced:
            return row, (Check("fail", f"{message} (--gate-expectations); review {source}"),)
        return row, (Check("warn", message + ("" if enforced else not_gating(profile, expectation.declared_in)),
                           InconclusiveClaim),)
    if check == MET:
        if expected == "fails":
            return row, (Check("xfail", f"{where} fails, as recorded: {result.summary()} ({source}: "
                                        f"{expectation.reason})"),)
        return row, ()
    message = (f"{where} now {result.status.upper()} ({result.summary()}) but {source} records "
               f"{expected!r}{f' ({expectation.reason})' if expectation.reason else ''}")
    if not enforced:
        return row, (Check("warn", message + not_gating(profile, expectation.declared_in), InheritedCheckMissed),)
    return row, (Check("fail", f"{message}; review {source}"),)


def gate_checks(profile: Profile, split: str, measured: list[tuple[Gate, float]], subject: str = ""
                ) -> tuple[list[dict], tuple[Check, ...]]:
    """CI gates: measured values against their limits (``*_min`` / ``*_max``, docs/statistics.md#gates), a row
    each; a gate fails the run when the run's own profile file declares it (or with ``inherit_checks``)."""
    rows, checks = [], []
    for gate, value in measured:
        ok = gate.passes(value)
        name = f"gate:{gate.key}" + (f":{subject}" if subject else "")
        rows.append({"claim": name, "family": "gate", "status": "holds" if ok else "fails", "expected": "holds",
                     "measured": f"{value:.4g} (limit {gate.limit:g})", "profile": profile.name, "scope": "gate",
                     "ranker": subject, **declaration(profile, gate.declared_in, MET if ok else MISSED)})
        if ok:
            continue
        message = (f"[{profile.name} / {split}] gate {gate.key}{f' ({subject})' if subject else ''}: measured "
                   f"{value:.4g}, limit {gate.limit:g} ([{gate.table}] {gate.key} in {shown(gate.declared_in)})")
        if profile.enforces(gate.declared_in):
            checks.append(Check("fail", message))
        else:
            checks.append(Check("warn", message + not_gating(profile, gate.declared_in), InheritedCheckMissed))
    return rows, tuple(checks)


def pin_baseline(ev: Evaluation, split: str) -> SavedSplit | None:
    """The saved run the split's pins were reviewed on (``reports.history.reviewed_run``), looked up once."""
    scope = ev.settings.run_scope()
    pins = {(p.ranker, p.measure): p.value for p in ev.profile.pins if p.scope == scope and p.split == split}
    return ev.shared(("pin-baseline", split), lambda: reviewed_run(
        ev.settings.results_dir, ev.profile.name, scope, split, ev.pool_digest(split), pins))


def pin_verdict(ev: Evaluation, pin: Pin) -> ChangeVerdict:
    """A pinned value now: paired against the reviewed run's per-direction outcomes when the history holds them
    (same pool snapshot), else by the pin's tolerance (docs/statistics.md#pins)."""
    now = float(ev.row(pin.split, pin.ranker)[pin.measure])
    baseline = pin_baseline(ev, pin.split)
    then = None if baseline is None else baseline.outcomes(pin.ranker)
    mine = ev.outcomes(pin.split, pin.ranker)
    try:
        measure = paired_measure(pin.measure)
    except KeyError:  # a pinned value without a per-direction test (n, paired): its tolerance decides
        measure = None
    if measure is None or then is None or set(then["qid"]) != set(mine["qid"]) \
            or (measure.position and then["rank_pos"].isna().any()):
        return tolerance_change(now, pin.value, pin.tolerance)
    then = then.set_index("qid").loc[mine["qid"]].reset_index()
    return paired_change(pin.measure, mine, then, group_labels(mine, ev.directions_for(pin.split, pin.ranker)),
                         ev.profile.margins.get(measure.name), ev.settings.seed)


def pin_check(ev: Evaluation, pin: Pin) -> tuple[dict, tuple[Check, ...]]:
    """The pin's row; it fails the run only when the value *changed* beyond what the margin allows, and warns when
    it is undetermined (docs/statistics.md#pins).

    A change shown to lie within the margin passes; so does a margin below the smallest one the sample can
    certify (``margin unreachable``): the row says so, with that margin, instead of a warning on every rerun.
    """
    verdict = pin_verdict(ev, pin)
    profile = ev.profile
    missed = verdict.decision == "changed"
    row = {"claim": f"pin:{pin.ranker}.{pin.measure}", "family": "pin", "status": verdict.decision,
           "expected": f"{pin.value:g} ± {pin.tolerance:g}", "measured": verdict.message(), "profile": profile.name,
           "scope": pin.scope, "ranker": pin.ranker,
           **declaration(profile, pin.declared_in, MISSED if missed else
                         UNDECIDED if verdict.decision == "undetermined" else MET),
           **({"n": verdict.n, "differing_groups": verdict.differing_groups, "discordant": verdict.discordant}
              if verdict.basis == "paired" else {})}
    where = f"[{profile.name} / {pin.scope} / {pin.split}] pinned {pin.ranker}.{pin.measure}"
    source = f"[pins.{pin.scope}.{pin.split}] in {shown(pin.declared_in)}"
    checks = []
    if verdict.decision == "undetermined":
        checks.append(Check("warn", f"{where}: {verdict.message()}; review the pin ({source})", UndeterminedPin))
    if missed:
        message = f"{where} {verdict.message()}"
        if not profile.enforces(pin.declared_in):
            checks.append(Check("warn", message + not_gating(profile, pin.declared_in), InheritedCheckMissed))
        else:
            checks.append(Check("fail", f"{message}. If the change is intended, review it and update {source}"))
    return row, tuple(checks)
