"""Pinned, reviewed numbers: a change that moves one fails the run with old, new, Δ, interval and p.

Claims only check directions; a pin notices when a code change silently moves a number
(fusion strict from 1,387 to 1,360 of 2,735 keeps every claim's direction). Pins live in the
profile per run scope (the full run, or one seeded subset with its grader sample). Where the
run history holds the reviewed run's per-direction outcomes on the same pool snapshot, a pin
is a paired comparison: *changed* (the tests of a change beyond the margin decide it) fails the run;
*unchanged* or *changed within margin* (within the profile's ``[margins]`` by TOST) and *margin
unreachable* (the margin is below what the sample can certify, said in the row) pass;
*undetermined* passes with a warning; otherwise the pin's tolerance decides
(docs/statistics.md#pins).
"""
from __future__ import annotations

import pytest


@pytest.mark.part("pin")
def test_pinned_value(record, pin) -> None:
    """A pinned, reviewed number: a change beyond its margin fails (the part's check), and its row says which."""
    assert record[pin.split].row("claims", f"pin:{pin.ranker}.{pin.measure}")["family"] == "pin"


@pytest.mark.part("margins")
def test_margins_are_part_of_the_manifest(record, evaluation, split) -> None:
    """The margins that decide "unchanged" travel with the results, so a later ``--compare-to`` uses them."""
    assert record[split].entries["margins"] == evaluation.profile.margins
