"""A claim's, gate's or pin's row recorded and its checks enforced in one call, as a spec does with a part."""
from __future__ import annotations

from harness import checks
from reports.plugin import enforce


def check_claim(profile, report, split: str, result, subset: bool, estimand: str = "", gate: bool = False) -> None:
    row, found = checks.claim_check(profile, split, result, subset, estimand, gate)
    report.add("claims", split, row)
    enforce(found)


def check_gates(profile, report, split: str, measured, subject: str = "") -> None:
    rows, found = checks.gate_checks(profile, split, measured, subject)
    for row in rows:
        report.add("claims", split, row)
    enforce(found)


def check_pin(ev, report, pin) -> None:
    row, found = checks.pin_check(ev, pin)
    report.add("claims", pin.split, row)
    enforce(found)
