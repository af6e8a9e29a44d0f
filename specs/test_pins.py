"""Pinned, reviewed numbers: a change that moves one fails the run with the old and the new value.

Claims only check directions; a pin notices when a code change silently moves a number
(fusion strict from 1,387 to 1,360 of 2,735 keeps every claim's direction). Pins live in the
profile per run scope (the full run, or one seeded subset with its grader sample), each with
a tolerance; move one only by reviewing the change that moved it.
"""
from __future__ import annotations

import math


def test_pinned_value(evaluation, pin, report) -> None:
    split = pin.split
    value = float(evaluation.row(split, pin.ranker)[pin.measure])
    moved = not (math.isfinite(value) and abs(value - pin.value) <= pin.tolerance)
    name = f"pin:{pin.ranker}.{pin.measure}"
    report.add("claims", split, {"claim": name, "family": "pin", "status": "fails" if moved else "holds",
                                 "expected": f"{pin.value:g} ± {pin.tolerance:g}", "measured": f"{value:.6g}",
                                 "profile": evaluation.profile.name, "scope": pin.scope})
    assert not moved, (f"[{evaluation.profile.name} / {pin.scope} / {split}] pinned {pin.ranker}.{pin.measure} moved: "
                       f"reviewed {pin.value:g} (tolerance {pin.tolerance:g}), now {value:.6g}. If the change is "
                       f"intended, review it and update [pins.{pin.scope}.{split}] in {evaluation.profile.path}")
