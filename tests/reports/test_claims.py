"""Three-outcome claim decisions, every case decided by hand."""
from __future__ import annotations

import math

import pytest

from reports.claims import CLAIM_COLUMNS, adjust_families, claim, decide, format_interval, format_p

NAN = float("nan")


@pytest.mark.parametrize(("effect", "lo", "hi", "side", "mde", "expected"), [
    (3.0, 1.0, 5.0, ">", 2.0, "holds"),         # interval above 0, effect beyond the MDE
    (3.0, 1.0, 5.0, "<", 2.0, "fails"),         # the same numbers against the opposite claim
    (-4.64, -6.36, -2.91, "<", 1.7, "holds"),   # README: E0 lowers strict vs fusion
    (-4.64, -6.36, -2.91, ">", 1.7, "fails"),
    (3.0, -1.0, 7.0, ">", 2.0, "inconclusive"),  # interval contains 0
    (0.0, -18.75, 18.75, ">", 26.0, "inconclusive"),  # the 16-direction grader sample (issue 14)
    (1.0, 0.5, 1.5, ">", 2.0, "inconclusive"),   # interval excludes 0 but the effect is below the MDE
    (-1.0, -1.5, -0.5, ">", 2.0, "inconclusive"),  # ... also on the failing side: not a decisive failure
    (2.0, 0.0, 4.0, ">", 1.0, "inconclusive"),   # lo exactly at the boundary is not "wholly above"
    (0.0, 0.0, 0.0, ">", 0.0, "inconclusive"),   # no discordant direction: [0, 0]
    (0.0, 0.0, 0.0, "<", 0.0, "inconclusive"),
    (2.0, 2.0, 2.0, ">", 0.0, "holds"),          # degenerate but away from the boundary, no MDE required
    (2.0, 1.0, 3.0, ">", 2.0, "holds"),          # effect exactly at the MDE counts
    (NAN, NAN, NAN, ">", 1.0, "inconclusive"),   # not measured
    (3.0, 1.0, 5.0, ">", NAN, "inconclusive"),   # no MDE known
])
def test_decide_by_hand(effect, lo, hi, side, mde, expected):
    assert decide(effect, lo, hi, side, mde) == expected


def test_boundary_other_than_zero():
    # A rate claimed above 0.5: decided against 0.5, and the MDE counts from 0.5.
    assert decide(0.62, 0.55, 0.70, ">", 0.0, boundary=0.5) == "holds"
    assert decide(0.62, 0.45, 0.70, ">", 0.0, boundary=0.5) == "inconclusive"
    assert decide(0.52, 0.51, 0.53, ">", 0.05, boundary=0.5) == "inconclusive"  # 0.02 beyond 0.5 < MDE 0.05


def test_bad_claims_are_rejected():
    with pytest.raises(ValueError, match="side"):
        decide(1.0, 0.0, 2.0, ">=", 0.0)
    with pytest.raises(ValueError, match="lo > hi"):
        decide(1.0, 2.0, 0.0, ">", 0.0)
    with pytest.raises(ValueError, match="minimum detectable effect"):
        decide(1.0, 0.5, 2.0, ">", -1.0)


def test_result_record_reason_and_formatting():
    held = claim("h2_ce_strict_gt_fusion", "H2", 3.2, 1.1, 5.3, ">", 2.1, 2735, p_value=0.003)
    assert held.status == "holds" and held.reason == "" and held.expected == "> 0"
    assert held.summary() == ("holds: +3.20 pts [+1.10, +5.30] (claimed > 0; MDE 2.10 pts; n=2735; p=0.003, "
                              "Holm —)")
    grader = claim("h2_grader_strict_gt_fusion", "H2", 0.0, -18.75, 18.75, ">", 26.7, 16,
                   measured="grader: strict 50.00%; fusion_sample: strict 50.00%")
    assert grader.status == "inconclusive"
    assert grader.reason == "interval [-18.75, +18.75] contains 0"
    assert grader.summary().endswith("; inconclusive: interval [-18.75, +18.75] contains 0; "
                                     "grader: strict 50.00%; fusion_sample: strict 50.00%")
    small = claim("c", "F", 1.0, 0.5, 1.5, ">", 2.0, 100)
    assert small.reason == "|effect| 1.00 pts is below the MDE 2.00 pts"
    assert claim("c", "F", 0.0, 0.0, 0.0, ">", 0.0, 16).reason == "interval [0, 0]: no discordant direction"
    assert claim("c", "F", NAN, NAN, NAN, ">", NAN, 0).reason == "not measured"
    row = grader.row()
    assert list(row) == list(CLAIM_COLUMNS)
    assert (row["status"], row["expected"], row["n"]) == ("inconclusive", "> 0", 16)
    assert held.row()["measured"] == held.summary()  # no measured text given: the summary stands in
    assert format_interval(-6.36, -2.91) == "[-6.36, -2.91]"
    assert format_interval(0.0, 1.0, digits=1) == "[+0.0, +1.0]"
    assert (format_p(0.0312), format_p(0.00001), format_p(NAN)) == ("0.031", "<0.0001", "—")


def test_holm_within_families_only():
    results = [claim("a", "H1", 2, 1, 3, ">", 0, 10, p_value=0.01), claim("b", "H2", 2, 1, 3, ">", 0, 10, p_value=0.04),
               claim("c", "H1", 2, 1, 3, ">", 0, 10, p_value=0.03), claim("d", "H2", 2, 1, 3, ">", 0, 10, p_value=0.02)]
    adjusted = adjust_families(results)
    # H1: .01, .03 -> .02, .03; H2: .04, .02 -> .04, .04 (sorted .02 × 2 = .04, then max(.04, .04 × 1)).
    assert [r.name for r in adjusted] == ["a", "b", "c", "d"]
    assert [r.p_holm for r in adjusted] == pytest.approx([0.02, 0.04, 0.03, 0.04])
    assert [r.status for r in adjusted] == [r.status for r in results]
    lone = adjust_families([claim("e", "H3", 2, 1, 3, ">", 0, 10)])
    assert math.isnan(lone[0].p_holm)


def test_holm_is_applied_within_each_family_when_the_report_is_assembled():
    import pandas as pd

    from reports.claims import holm_by_family

    frame = pd.DataFrame({"claim": ["a", "b", "c", "g"], "family": ["H1", "H1", "H2", "gate"],
                          "p_value": [0.01, 0.04, 0.03, None]})
    out = holm_by_family(frame).set_index("claim")
    assert out.at["a", "p_holm"] == pytest.approx(0.02) and out.at["b", "p_holm"] == pytest.approx(0.04)
    assert out.at["c", "p_holm"] == pytest.approx(0.03) and pd.isna(out.at["g", "p_holm"])
