"""Asserting a hypothesis claim against the reviewed profile, and recording it either way.

A claim that the profile expects to hold is asserted with its measured numbers in the
message; one recorded as an expected failure becomes an xfail carrying the numbers,
and an expected failure that starts to hold fails loudly so the profile is revisited.
"""
from __future__ import annotations

import pytest

from harness.profile import Profile


def check_claim(profile: Profile, report, split: str, claim: str, holds: bool, measured: str,
                subset: bool = False) -> None:
    """Record the claim row, then assert / xfail it as the profile says."""
    expect, reason = profile.claim(claim, split).expectation(subset)
    status = "holds" if holds else "fails"
    report.add("claims", split, {"claim": claim, "status": status, "expected": expect, "measured": measured,
                                 "profile": profile.name, "scope": "subset" if subset else "full"})
    where = f"[{profile.name}{' subset' if subset else ''} / {split}] {claim}"
    if expect == "xfail":
        if holds:
            pytest.fail(f"{where} now HOLDS ({measured}) but {profile.path.name} records it as an expected failure "
                        f"({reason}); review the profile")
        pytest.xfail(f"{where} does not hold, as recorded: {measured} (profile: {reason})")
    assert holds, f"{where} does not hold: {measured} (profile {profile.path.name} expects it to hold)"


def check_gate(profile: Profile, report, split: str, gate: str, value: float) -> None:
    """CI gate: a measured value against its limit (``*_min`` / ``*_max``) in the profile."""
    if gate not in profile.gates:
        raise KeyError(f"gate {gate!r} is not declared in {profile.path}")
    limit = float(profile.gates[gate])
    ok = value >= limit if gate.endswith("_min") else value <= limit
    report.add("claims", split, {"claim": f"gate:{gate}", "status": "holds" if ok else "fails", "expected": "holds",
                                 "measured": f"{value:.4g} (limit {limit:g})", "profile": profile.name, "scope": "gate"})
    assert ok, f"[{profile.name} / {split}] gate {gate}: measured {value:.4g}, limit {limit:g}"
