"""Claims, gates and pins: every row for the record, and the checks only reviewed, decisive expectations assert.

The verdicts come from the session's claim book (``harness.claims``); this module makes each one's claims-table row
and the ``Check``s it implies, which the specs turn into pytest outcomes (``enforce``; docs/statistics.md#claims):

- the row for the claims table is always recorded; a decisive result that contradicts the
  profile's reviewed expectation fails the test with old and new; an expected failure that
  still fails is an xfail carrying the numbers; an inconclusive claim is reported with its
  numbers and n and never asserted or expected-failed; on a subset run a full-run ``expect``
  the subset leaves undecided is reported as not decidable on this subset
  (docs/statistics.md#expectations), unless ``--gate-expectations`` and its interval lies wholly beyond the
  non-inferiority margin against it: the subset gate fails it (docs/statistics.md#subset-gate);
- a pin fails the run only when its value *changed* beyond its margin (docs/statistics.md#pins), a gate when a
  measured value is past its limit (docs/statistics.md#gates);
- expectations, gates and pins fail only the runs of the profile whose file declares them (or with
  ``inherit_checks``); an inherited one that is not met is recorded and warned about, never failed
  (docs/statistics.md#inherited-checks).
"""
from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.profile_file import shown
from harness.profile_records import Expectation, Gate, Pin, Profile
from reports.comparisons import group_labels
from reports.changes import ChangeVerdict, paired_change, tolerance_change
from reports.columns import POINTS
from reports.history import SavedSplit, reviewed_run
from reports.hypotheses import ClaimResult, check_verdict
from reports.measures import paired_measure

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
#: The subset gate's non-inferiority margin, a share of the measure's range (10 points of a rate, 0.10 of MRR):
#: chosen by simulation on the CI subset's design (docs/statistics.md#subset-gate).
SUBSET_MARGIN = 0.10


@dataclass(frozen=True)
class Check:
    """What a verdict asks of the run: a warning (``category``), a failure, or an expected failure (xfail)."""

    action: str
    message: str
    category: type[Warning] | None = None


def enforce(checks: Iterable[Check]) -> None:
    """The checks as pytest outcomes: every warning, then one failure naming every failed check, else an xfail."""
    checks = tuple(checks)
    for check in checks:
        if check.action == "warn":
            warnings.warn(check.category(check.message), stacklevel=2)
    failed = [c.message for c in checks if c.action == "fail"]
    if failed:
        pytest.fail("; ".join(failed))
    for check in checks:
        if check.action == "xfail":
            pytest.xfail(check.message)


def single_seed_row(ev: Evaluation, result: ClaimResult) -> dict:
    """The single-seed twin of a seed-averaged claim as its own claims row (``<claim>@seed<k>``), never asserted."""
    row = result.row()
    check_verdict(row["status"], row["p_adjusted"], row["p_opposite_adjusted"], result.alpha, result.name)
    return {**row, "claim": f"{result.name}@seed{ev.settings.seed}", "estimand": f"single seed {ev.settings.seed}",
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


def claim_check(profile: Profile, split: str, result: ClaimResult, subset: bool, estimand: str = "",
                gate: bool = False) -> tuple[dict, tuple[Check, ...]]:
    """The claim's row, and what the profile's reviewed expectation makes of it (``gate``: a reviewed expectation
    the run leaves inconclusive fails instead of warning). Only the expectations the run's own profile file declares
    (or all, with ``inherit_checks``) can fail it."""
    declared = profile.claim(result.name, split)
    expectation = declared.expectation(subset) if declared is not None else None
    expected = expectation.expect if expectation is not None else ""
    row = result.row()
    check_verdict(row["status"], row["p_adjusted"], row["p_opposite_adjusted"], result.alpha, result.name)
    check = expectation_check(result.status, expectation, subset)
    if check == NOT_DECIDABLE and gate and contradicts(result, expectation.expect):
        check = CONTRADICTED
    row = {**row, "estimand": estimand, "expected": expected, "profile": profile.name,
           "scope": "subset" if subset else "full",
           **declaration(profile, expectation and expectation.declared_in, check)}
    if expectation is None:
        return row, ()  # reported, not asserted: no reviewed expectation for this claim
    where = f"[{profile.name}{' subset' if subset else ''} / {split}] {result.name}"
    source = shown(expectation.declared_in)
    enforced = profile.enforces(expectation.declared_in)
    if check == CONTRADICTED:
        message = (f"{where}: {source} expects {expected!r} (reviewed on the full run); not decidable on this subset, "
                   f"but its interval lies wholly beyond the {subset_margin(result.unit):g} {result.unit} "
                   f"non-inferiority margin against it (the subset gate, docs/statistics.md#subset-gate): "
                   f"{result.summary()}")
        if enforced:
            return row, (Check("fail", f"{message}; review {source}"),)
        return row, (Check("warn", message + not_gating(profile, expectation.declared_in), InheritedCheckMissed),)
    if check == NOT_DECIDABLE:
        return row, (Check("warn", f"{where}: {source} expects {expected!r} (reviewed on the full run), not decidable "
                                   f"on this subset: {result.summary()}", NotDecidableOnSubset),)
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
