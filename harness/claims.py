"""Claims and gates as pytest outcomes: record every claim, assert only reviewed, decisive expectations.

A measured claim has three outcomes (SPEC §6): ``holds``, ``fails``, ``inconclusive``. The
decision itself is reports.claims; this module is the pytest side: the row for the claims
table is always recorded; a decisive result that contradicts the profile's reviewed
expectation fails the test with old and new; an expected failure that still fails is an
xfail carrying the numbers; an inconclusive claim is reported with its numbers and n and
never asserted or expected-failed.
"""
from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np
import pytest

from harness.profile import Profile
from reports.bootstrap import Ratio, RatioDifference, group_bootstrap, paired_mde
from reports.claims import ClaimResult, claim
from reports.stats import compare

if TYPE_CHECKING:
    from harness.session import Evaluation


class InconclusiveClaim(UserWarning):
    """A claim whose interval contains its boundary or whose effect is below the detectable size."""


def check_claim(profile: Profile, report, split: str, result: ClaimResult, subset: bool) -> None:
    """Record the claim row, then assert / xfail it as the profile's reviewed expectation says."""
    declared = profile.claim(result.name, split)
    expectation = declared.expectation(subset) if declared is not None else None
    expected = expectation.expect if expectation is not None else ""
    report.add("claims", split, {**result.row(), "expected": expected, "profile": profile.name,
                                 "scope": "subset" if subset else "full"})
    where = f"[{profile.name}{' subset' if subset else ''} / {split}] {result.name}"
    if result.status == "inconclusive":
        if expected:
            warnings.warn(InconclusiveClaim(f"{where} was reviewed as {expected!r} but is now inconclusive: "
                                            f"{result.measured}"), stacklevel=2)
        return
    if not expected:
        return  # reported, not asserted: no reviewed expectation for this claim
    if result.status == expected:
        if expected == "fails":
            pytest.xfail(f"{where} fails, as recorded: {result.measured} (profile: {expectation.reason})")
        return
    pytest.fail(f"{where} now {result.status.upper()} ({result.measured}) but {profile.path.name} records "
                f"{expected!r}{f' ({expectation.reason})' if expectation.reason else ''}; review the profile")


def check_gate(profile: Profile, report, split: str, gate: str, value: float, subject: str = "") -> None:
    """CI gate: a measured value against its limit (``*_min`` / ``*_max``) in the profile."""
    if gate not in profile.gates:
        return
    limit = profile.gates[gate]
    ok = value >= limit if gate.endswith("_min") else value <= limit
    name = f"gate:{gate}" + (f":{subject}" if subject else "")
    report.add("claims", split, {"claim": name, "family": "gate", "status": "holds" if ok else "fails",
                                 "expected": "holds", "measured": f"{value:.4g} (limit {limit:g})",
                                 "profile": profile.name, "scope": "gate"})
    assert ok, f"[{profile.name} / {split}] gate {gate}{f' ({subject})' if subject else ''}: measured {value:.4g}, limit {limit:g}"


def h2_claims(profile: Profile) -> dict[str, tuple[str, str, str]]:
    """Generated H2 claims: every window ranker vs its ``compare_to`` ranker -> (ranker, versus, measure)."""
    out: dict[str, tuple[str, str, str]] = {}
    for decl in profile.window_rankers():
        if decl.baseline and decl.baseline != decl.name:
            out[f"h2_{decl.name}_strict_gt_{decl.baseline}"] = (decl.name, decl.baseline, "strict")
            if not decl.designated_only:
                out[f"h2_{decl.name}_mrr_gt_{decl.baseline}"] = (decl.name, decl.baseline, "mrr")
    return out


def h3_claims(profile: Profile) -> dict[str, str]:
    """Generated H3 claims: every argmax window ranker on a bounded grade scale -> its name."""
    return {f"h3_{d.name}_tie_branch_concentrates_failures": d.name for d in profile.window_rankers()
            if d.max_score is not None and d.options.get("grade", "argmax") == "argmax"}


def check_claim_names(profile: Profile) -> None:
    """Every claim the profile states an expectation for must be one the specs measure."""
    known = ({c.name for c in profile.comparisons()} | set(h2_claims(profile)) | set(h3_claims(profile))
             | set(tie_twins(profile)))
    for name in profile.claims:
        base = name.split("@", 1)[0]
        if base not in known:
            raise pytest.UsageError(f"--profile: {profile.path} [claims.{name}]: no spec measures a claim named "
                                    f"{base!r} for the declared rankers; known claims: {sorted(known)}")


def comparison_result(ev: Evaluation, split: str, name: str, family: str, ranker: str, versus: str, measure: str,
                      side: str) -> ClaimResult:
    """``ranker`` vs ``versus`` on ``measure`` over the ranker's directions, decided by its paired interval."""
    first = ev.outcomes(split, ranker)
    second = ev.outcomes_on(split, versus, first["qid"])
    row = compare(first, second, ev.directions_for(split, ranker), seed=ev.settings.seed, names=(ranker, versus))
    if measure == "strict":
        effect, lo, hi, mde, p, unit = (row["delta_pts"], row["delta_lo"], row["delta_hi"], row["mde_pts"],
                                        row["p_strict"], "pts")
    else:
        effect, lo, hi, mde, p, unit = (row["delta_mrr"], row["delta_mrr_lo"], row["delta_mrr_hi"], row["mde_mrr"],
                                        row["p_mrr"], "MRR")
    mine = ev.row(split, ranker)
    ref_mrr = (1.0 / second["rank_pos"].astype(float)).mean()
    measured = (f"{ranker}: strict {mine['strict']}/{mine['n']} ({mine['strict_pct']:.2f}%), MRR {mine['mrr']:.4f}; "
                f"{versus} on the same {len(second)} directions: strict {int(second['strict'].sum())} "
                f"({100.0 * second['strict'].mean():.2f}%), MRR {ref_mrr:.4f}; "
                f"Δ {effect:+.4g} {unit} [{lo:+.4g}, {hi:+.4g}], MDE {mde:.3g}, n={len(first)}")
    return claim(name, family, effect, lo, hi, side, mde, len(first), unit=unit, p_value=p, measured=measured)


def tie_branch_result(name: str, per_direction, n: int, groups, seed: int, ranker: str) -> ClaimResult:
    """H3: the equal-score branch's share of non-successes exceeds its share of directions (group bootstrap)."""
    equal = (per_direction["branch"] == "equal_score").to_numpy(dtype=float)
    failed = (~per_direction["strict"].to_numpy(dtype=bool)).astype(float)
    values = {"eq_fail": equal * failed, "fail": failed, "eq": equal, "n": np.ones(len(equal))}
    statistic = RatioDifference(Ratio("eq_fail", "fail"), Ratio("eq", "n"))
    try:
        ci = group_bootstrap(values, groups, {"h3": statistic}, seed=seed)["h3"]
        # Per-direction influence of the share difference (delta method): its second moment floors the MDE.
        share_fail, share_eq = (equal * failed).sum() / failed.sum(), equal.mean()
        influence = (equal * failed - share_fail * failed) / failed.mean() - (equal - share_eq)
        effect, lo, hi, mde = 100 * ci.point, 100 * ci.lo, 100 * ci.hi, 100 * paired_mde(ci.se, influence)
    except ValueError:  # no failure in the population or in some resample: the shares are undefined
        effect = lo = hi = mde = float("nan")
    n_eq, n_fail = int(equal.sum()), int(failed.sum())
    measured = (f"{ranker}: equal-score branch {n_eq}/{n} directions ({100 * n_eq / max(n, 1):.2f}%), "
                f"{int((equal * failed).sum())}/{n_fail} non-successes; share difference {effect:+.2f} pts "
                f"[{lo:+.2f}, {hi:+.2f}], MDE {mde:.2f}")
    return claim(name, "H3", effect, lo, hi, ">", mde, n, p_value=float("nan"), measured=measured)


def same_scorer(a, b) -> bool:
    """Two window declarations that read the same judgments: kind and options alike except the grade rule."""
    return a.kind == b.kind and a.scorer_options == b.scorer_options


def tie_twins(profile: Profile) -> dict[str, tuple[str, str]]:
    """Beyond the paper (issue 13): each expected-grade ranker and its argmax twin on the same directions.

    Claim name -> (expected-grade ranker, argmax ranker). The twin shares scorer, population,
    mode, reference and tie-breaker, so the two differ only in how a judgment becomes a score.
    """
    out: dict[str, tuple[str, str]] = {}
    windows = profile.window_rankers()
    for d in windows:
        if d.options.get("grade") != "expected":
            continue
        for t in windows:
            if (t.options.get("grade", "argmax") == "argmax" and same_scorer(d, t) and t.population == d.population
                    and t.mode == d.mode and t.reference == d.reference and t.tie_breaker == d.tie_breaker):
                out[f"h3_{d.name}_resolves_ties_of_{t.name}"] = (d.name, t.name)
                break
    return out


def designated_twins(profile: Profile) -> dict[str, tuple[str, str]]:
    """Each designated-pair ranker and a fully windowed twin (same scorer and grade rule): id -> (designated, window)."""
    out: dict[str, tuple[str, str]] = {}
    for d in profile.window_rankers():
        if not d.designated_only:
            continue
        for w in profile.window_rankers():
            if (not w.designated_only and same_scorer(d, w) and d.options.get("grade") == w.options.get("grade")
                    and w.reference == d.reference and w.tie_breaker == d.tie_breaker):
                out[f"{d.name}-vs-{w.name}"] = (d.name, w.name)
    return out
