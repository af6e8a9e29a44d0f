"""A pin's three answers keep their rates (docs/statistics.md#tost): *changed* only when the tests of a change beyond
the margin decide it, so a true change inside the margin is called changed in at most α of reruns whatever the rerun
churn (single directions or whole groups); *unchanged* only when the TOST certifies the margin; *undetermined*
otherwise, with the smallest margin the sample could certify. A change concentrated in a few groups (which the
guarded paired test cannot call a change) still lies beyond the margin, and the pin says so through rerun churn.

The rates are the decision's, measured on the frozen Test pool's real fusion outcomes (``data/pools``) and on
synthetic groups of 1–12 directions, from the decision test's own parts at once (``tests.support.pin_reruns``), and
the shipped ``paired_change`` is checked to decide the same way rerun by rerun."""
from __future__ import annotations

import pytest

from fixtures.study import build_study
from reports.changes import decide_change, paired_change
from tests.support.pin_reruns import decisions, outcome_frame, real_test, reruns, synthetic

#: Reruns a cell (SE 1.1 points at 5%), and reruns of each cell decided by the shipped code too.
RUNS, SHIPPED = 400, 3
MARGIN = 1.0


@pytest.fixture(scope="module")
def designs():
    return {"real": real_test(build_study()), "synthetic": synthetic()}


def test_a_regression_concentrated_in_12_groups_fails_a_one_point_pin(designs) -> None:
    """420 groups of 1–12 directions, no churn; the groups with the most right directions lose 2.7 points: the
    guarded paired test cannot call it a change (few groups differ), the tests beyond the margin do."""
    design = designs["synthetic"]
    now, then = reruns(design, 2.7, 0.0, "directions", 1, 13)
    verdict = paired_change("strict_pct", outcome_frame(now[0]), outcome_frame(then[0]), design.codes, MARGIN)
    print(f"\npins: {verdict.message()}")
    assert verdict.differing_groups <= 12 and verdict.delta < -2.6
    assert verdict.p_changed > 0.05  # the guarded paired test alone cannot call it a change
    assert verdict.decision == "changed" and verdict.p_beyond <= 0.05


def test_only_the_tests_beyond_the_margin_decide_changed() -> None:
    """A paired test that detects a change the TOST cannot certify inside the margin is *undetermined*, not
    changed; without a margin (p_beyond None) the paired test decides."""
    assert decide_change(0.001, 0.9, p_beyond=0.3) == "undetermined"
    assert decide_change(0.2, 0.9, p_beyond=0.01) == "changed"
    assert decide_change(0.001, 0.01, p_beyond=0.9) == "changed within margin"
    assert decide_change(0.2, 0.01, p_beyond=0.9) == "unchanged"
    assert decide_change(0.001, 1.0) == "changed" and decide_change(0.2, 1.0) == "undetermined"
    assert decide_change(0.2, 0.9, reachable=False, p_beyond=0.2, within=False) == "undetermined"
    assert decide_change(0.2, 0.9, reachable=False, p_beyond=0.2, within=True) == "margin unreachable"


#: (true change as a multiple of the margin, churn, whether the pin must call it changed): inside the margin at 2%
#: and 5% churn, and 2.7 × the margin at 2% churn, what the pin must catch.
CELLS = [(0.5, 0.02, False), (0.5, 0.05, False), (0.99, 0.02, False), (0.99, 0.05, False), (2.7, 0.02, True)]


@pytest.mark.parametrize("unit", ["directions", "groups"])
@pytest.mark.parametrize("which", ["real", "synthetic"])
def test_a_pins_false_alarms_and_catches_through_rerun_churn(designs, which, unit, capsys) -> None:
    """A true loss of 0.5 or 0.99 × the ±1-point margin reads *changed* in at most 5% of reruns, with 2% or 5% of
    single directions or of whole groups churning; 2.7 × the margin reads *changed* in at least 95%. The first
    reruns of each cell go through the shipped ``paired_change`` as well, which decides as the parts do."""
    design, lines = designs[which], []
    for k, (factor, churn, catch) in enumerate(CELLS):
        now, then = reruns(design, factor * MARGIN, churn, unit, RUNS, 100 * k + 7)
        rates = decisions(design, now, then, MARGIN)
        changed = float(rates["changed"].mean())
        lines.append(f"{factor:g} x margin, {100 * churn:g}% churn: changed {100 * changed:.1f}%, unchanged "
                     f"{100 * rates['unchanged'].mean():.1f}%, undetermined {100 * rates['undetermined'].mean():.1f}%")
        assert changed >= 0.95 if catch else changed <= 0.05, lines[-1]
        for i in range(SHIPPED):
            verdict = paired_change("strict_pct", outcome_frame(now[i]), outcome_frame(then[i]), design.codes, MARGIN)
            if not 0.04 < rates["p_beyond"][i] < 0.0625:  # outside the shipped test's Monte Carlo noise
                assert (verdict.decision == "changed") == bool(rates["changed"][i]), (lines[-1], verdict.message())
            if verdict.decision != "changed" and verdict.delta < -MARGIN:
                assert verdict.uncaught and "not certifiably caught" in verdict.message()
    with capsys.disabled():
        print(f"\npins, {design.name}, churn of {unit}, {RUNS} reruns a cell:\n  " + "\n  ".join(lines))


def test_identical_outcomes_are_never_changed(designs) -> None:
    design = designs["real"]
    base = outcome_frame(design.base)
    verdict = paired_change("strict_pct", base, base, design.codes, MARGIN)
    assert verdict.decision == "unchanged" and verdict.delta == 0.0
    assert verdict.catches == MARGIN  # nothing churns: anything beyond the margin is caught
