"""Claims, gates and pins as pytest outcomes: every row recorded, only reviewed, decisive expectations asserted.

The verdicts come from the session's claim book (``harness.claims``); this module records them and turns them into
pytest outcomes (docs/statistics.md#claims):

- the row for the claims table is always recorded; a decisive result that contradicts the
  profile's reviewed expectation fails the test with old and new; an expected failure that
  still fails is an xfail carrying the numbers; an inconclusive claim is reported with its
  numbers and n and never asserted or expected-failed; on a subset run a full-run ``expect``
  the subset leaves undecided is reported as not decidable on this subset
  (docs/statistics.md#expectations);
- a pin fails the run only when its value *changed* beyond its margin (docs/statistics.md#pins), a gate when a
  measured value is past its limit (docs/statistics.md#gates);
- expectations, gates and pins fail only the runs of the profile whose file declares them (or with
  ``inherit_checks``); an inherited one that is not met is recorded and warned about, never failed
  (docs/statistics.md#inherited-checks).
"""
from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from harness.profile_file import shown
from harness.profile_records import Expectation, Gate, Pin, Profile
from reports.comparisons import group_labels
from reports.changes import ChangeVerdict, paired_change, tolerance_change
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


def record_single_seed(ev: Evaluation, report, split: str, result: ClaimResult) -> None:
    """The single-seed twin of a seed-averaged claim as its own claims row (``<claim>@seed<k>``), never asserted."""
    row = result.row()
    check_verdict(row["status"], row["p_adjusted"], row["p_opposite_adjusted"], result.alpha, result.name)
    report.add("claims", split, {**row, "claim": f"{result.name}@seed{ev.settings.seed}",
                                 "estimand": f"single seed {ev.settings.seed}", "expected": "",
                                 "profile": ev.profile.name, "scope": "subset" if ev.is_subset else "full",
                                 **declaration(ev.profile, None, "")})


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


def check_claim(profile: Profile, report, split: str, result: ClaimResult, subset: bool, estimand: str = "",
                gate: bool = False) -> None:
    """Record the claim row, then assert / xfail it as the profile's reviewed expectation says (``gate``: a
    reviewed expectation the run leaves inconclusive fails instead of warning). Only the expectations the run's
    own profile file declares (or all, with ``inherit_checks``) can fail it."""
    declared = profile.claim(result.name, split)
    expectation = declared.expectation(subset) if declared is not None else None
    expected = expectation.expect if expectation is not None else ""
    row = result.row()
    check_verdict(row["status"], row["p_adjusted"], row["p_opposite_adjusted"], result.alpha, result.name)
    check = expectation_check(result.status, expectation, subset)
    report.add("claims", split, {**row, "estimand": estimand, "expected": expected, "profile": profile.name,
                                 "scope": "subset" if subset else "full",
                                 **declaration(profile, expectation and expectation.declared_in, check)})
    if expectation is None:
        return  # reported, not asserted: no reviewed expectation for this claim
    where = f"[{profile.name}{' subset' if subset else ''} / {split}] {result.name}"
    source = shown(expectation.declared_in)
    enforced = profile.enforces(expectation.declared_in)
    if check == NOT_DECIDABLE:
        warnings.warn(NotDecidableOnSubset(f"{where}: {source} expects {expected!r} (reviewed on the full run), "
                                           f"not decidable on this subset: {result.summary()}"), stacklevel=2)
    elif check == UNDECIDED:
        message = f"{where} was reviewed as {expected!r} but is now inconclusive: {result.summary()} ({source})"
        if gate and enforced:
            pytest.fail(f"{message} (--gate-expectations); review {source}")
        warnings.warn(InconclusiveClaim(message + ("" if enforced else not_gating(profile, expectation.declared_in))),
                      stacklevel=2)
    elif check == MET:
        if expected == "fails":
            pytest.xfail(f"{where} fails, as recorded: {result.summary()} ({source}: {expectation.reason})")
    else:
        message = (f"{where} now {result.status.upper()} ({result.summary()}) but {source} records "
                   f"{expected!r}{f' ({expectation.reason})' if expectation.reason else ''}")
        if not enforced:
            warnings.warn(InheritedCheckMissed(message + not_gating(profile, expectation.declared_in)), stacklevel=2)
            return
        pytest.fail(f"{message}; review {source}")


def check_gates(profile: Profile, report, split: str, measured: list[tuple[Gate, float]], subject: str = "") -> None:
    """CI gates: measured values against their limits (``*_min`` / ``*_max``, docs/statistics.md#gates), every row
    recorded before any fails; a gate fails the run when the run's own profile file declares it (or with
    ``inherit_checks``)."""
    failed = []
    for gate, value in measured:
        ok = gate.passes(value)
        name = f"gate:{gate.key}" + (f":{subject}" if subject else "")
        report.add("claims", split, {"claim": name, "family": "gate", "status": "holds" if ok else "fails",
                                     "expected": "holds", "measured": f"{value:.4g} (limit {gate.limit:g})",
                                     "profile": profile.name, "scope": "gate", "ranker": subject,
                                     **declaration(profile, gate.declared_in, MET if ok else MISSED)})
        if ok:
            continue
        message = (f"[{profile.name} / {split}] gate {gate.key}{f' ({subject})' if subject else ''}: measured "
                   f"{value:.4g}, limit {gate.limit:g} ([{gate.table}] {gate.key} in {shown(gate.declared_in)})")
        if profile.enforces(gate.declared_in):
            failed.append(message)
        else:
            warnings.warn(InheritedCheckMissed(message + not_gating(profile, gate.declared_in)), stacklevel=2)
    if failed:
        pytest.fail("; ".join(failed))


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


def check_pin(ev: Evaluation, report, pin: Pin) -> None:
    """Record the pin's decision; fail the run only when the value *changed* beyond what the margin allows, warn
    when it is undetermined (docs/statistics.md#pins).

    A change shown to lie within the margin passes; so does a margin below the smallest one the sample can
    certify (``margin unreachable``): the row says so, with that margin, instead of a warning on every rerun.
    """
    verdict = pin_verdict(ev, pin)
    profile = ev.profile
    missed = verdict.decision == "changed"
    report.add("claims", pin.split, {"claim": f"pin:{pin.ranker}.{pin.measure}", "family": "pin",
                                     "status": verdict.decision, "expected": f"{pin.value:g} ± {pin.tolerance:g}",
                                     "measured": verdict.message(), "profile": profile.name, "scope": pin.scope,
                                     "ranker": pin.ranker,
                                     **declaration(profile, pin.declared_in, MISSED if missed else
                                                   UNDECIDED if verdict.decision == "undetermined" else MET),
                                     **({"n": verdict.n, "differing_groups": verdict.differing_groups,
                                         "discordant": verdict.discordant} if verdict.basis == "paired" else {})})
    where = f"[{profile.name} / {pin.scope} / {pin.split}] pinned {pin.ranker}.{pin.measure}"
    source = f"[pins.{pin.scope}.{pin.split}] in {shown(pin.declared_in)}"
    if verdict.decision == "undetermined":
        warnings.warn(UndeterminedPin(f"{where}: {verdict.message()}; review the pin ({source})"), stacklevel=2)
    if not missed:
        return
    message = f"{where} {verdict.message()}"
    if not profile.enforces(pin.declared_in):
        warnings.warn(InheritedCheckMissed(message + not_gating(profile, pin.declared_in)), stacklevel=2)
        return
    pytest.fail(f"{message}. If the change is intended, review it and update {source}")
