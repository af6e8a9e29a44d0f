"""Claims decided by one-sided group tests (``reports.group_tests.mean_test``) with Holm in their family, every case by hand."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm, permutation_test

from rankers.kinds import kind
from rankers.declarations import RankerDecl
from reports.claim_families import ClaimDefinition, DeclaredComparison, claim_definitions
from reports.claim_measures import ClaimTest, measure_comparison, measure_tie_branch, not_measured
from reports.hypotheses import (ClaimResult, check_verdict, decidable, decide_family, format_interval,
                                format_p, robust_to_noise)
from reports.table_registry import TABLES
from reports.group_tests import mean_test, sign_flip_test, skew_corrected_p
from reports.stats import holm

NAN = float("nan")


def definition(name: str = "c", family: str = "F", side: str = ">") -> ClaimDefinition:
    return ClaimDefinition(name, family, "comparison", "a", "b", "strict", side)


def measured(p_greater: float, p_less: float, name: str = "c", family: str = "F", side: str = ">",
             effect: float = 3.0, null_sd: float = 1.0, n: int = 100, groups: int = 50) -> ClaimTest:
    return ClaimTest(definition(name, family, side), effect, effect - 2, effect + 2, null_sd, p_greater, p_less, n,
                     groups, "pts", differing_groups=30, discordant=45)


def scipy_p(d, alternative: str) -> float:
    return float(permutation_test((np.asarray(d, dtype=float),), lambda x, axis: np.sum(x, axis=axis),
                                  permutation_type="samples", n_resamples=np.inf, vectorized=True,
                                  alternative=alternative).pvalue)


def test_one_claim_is_a_two_sided_test_at_alpha():
    """Alone in its family a claim contributes two hypotheses: each side is tested at α/2 = 0.025."""
    assert decide_family([measured(0.02, 0.99)])[0].status == "holds"
    assert decide_family([measured(0.03, 0.98)])[0].status == "inconclusive"  # 0.03 × 2 = 0.06 > 0.05
    assert decide_family([measured(0.99, 0.01)])[0].status == "fails"
    assert decide_family([measured(0.99, 0.01, side="<")])[0].status == "holds"  # claimed side is "<"
    r = decide_family([measured(0.02, 0.99)])[0]
    assert (r.p_value, r.p_adjusted, r.p_opposite, r.p_opposite_adjusted) == (0.02, 0.04, 0.99, 0.99)
    assert (r.family_hypotheses, r.mde_level) == (2, 0.025)


def test_holm_runs_over_both_sides_of_every_claim_in_the_family():
    tests = [measured(0.001, 1.0, "a"), measured(0.012, 0.99, "b"), measured(0.9, 0.2, "c")]
    results = decide_family(tests)
    expected = holm([0.001, 0.012, 0.9, 1.0, 0.99, 0.2])
    assert [r.p_adjusted for r in results] == pytest.approx(expected[:3])
    assert [r.p_opposite_adjusted for r in results] == pytest.approx(expected[3:])
    # a: 0.001 × 6; b: 0.012 × 5 = 0.06 > 0.05 -> inconclusive although alone it would hold.
    assert [r.status for r in results] == ["holds", "inconclusive", "inconclusive"]
    assert all(r.family_hypotheses == 6 and r.mde_level == pytest.approx(0.05 / 6) for r in results)
    assert decide_family([tests[1]])[0].status == "holds"


def test_unmeasured_claims_keep_the_declared_family():
    """A claim not run here counts as two hypotheses with p = 1: never more decisive than the full run."""
    alone = decide_family([measured(0.02, 0.99)])[0]
    with_two_more = decide_family([measured(0.02, 0.99)], unmeasured=2)[0]
    assert alone.status == "holds" and with_two_more.status == "inconclusive"
    assert with_two_more.p_adjusted == pytest.approx(0.02 * 6) and with_two_more.family_hypotheses == 6


def test_a_sample_too_small_to_decide_is_set_aside_before_its_outcomes_are_read():
    """8 directions in 4 groups, all improved: the exact one-sided p is 1/16, the smallest 4 groups can give."""
    d = np.array([2.0, 2.0, 2.0, 2.0])
    t = sign_flip_test(d)
    assert t.p_greater == 1 / 16 == pytest.approx(scipy_p(d, "greater"))
    assert not decidable([2] * 4) and not decidable([2] * 5)
    assert decidable([2] * 6, guarded=False)  # H3 (never guarded): the sign flip's floor 1/64 alone
    # The decision test: equal groups that all gain whole reach α/2 from 9 groups (1/E of the bound-aware part).
    assert not decidable([4] * 8) and decidable([4] * 9) and decidable([1] * 40)
    tiny = measured(t.p_greater, t.p_less, "tiny", groups=4, effect=100.0, null_sd=0.0)
    big = measured(0.015, 0.99, "big")
    results = decide_family([tiny, big])
    assert results[0].status == "inconclusive" and results[0].reason.startswith("unable to decide: 4 source group(s)")
    assert math.isnan(results[0].p_adjusted) and math.isnan(results[0].mde)
    # Set aside, it does not dilute the family: "big" is decided as if alone (0.015 × 2 = 0.03).
    assert results[1].status == "holds" and results[1].p_adjusted == pytest.approx(0.03)
    assert results[1].family_hypotheses == 2


def test_power_is_reported_beside_the_verdict_never_in_it():
    """A small effect that the test finds holds; the MDE and directions needed are planning numbers only."""
    z = norm.ppf(1 - 0.025) + norm.ppf(0.8)
    r = decide_family([measured(0.001, 0.999, effect=1.0, null_sd=0.5, n=400)])[0]
    assert r.status == "holds" and r.mde == pytest.approx(z * 0.5) and r.mde > r.effect
    assert r.directions_needed == math.ceil(400 * (z * 0.5 / 1.0) ** 2)
    r = decide_family([measured(0.2, 0.8, effect=1.0, null_sd=1.0, n=400)])[0]
    assert r.status == "inconclusive"
    assert r.directions_needed == math.ceil(400 * z ** 2) and f"about {int(r.directions_needed):,} directions" in r.reason


def test_not_measured_and_mixed_families():
    results = decide_family([measured(NAN, NAN, "x", effect=NAN), measured(0.001, 1.0, "y")])
    assert results[0].status == "inconclusive" and results[0].reason.startswith("not measured")
    assert results[1].p_adjusted == pytest.approx(0.004)  # x still counts: 2 claims, 4 hypotheses
    with pytest.raises(ValueError, match="one family"):
        decide_family([measured(0.1, 0.9, "a", "F"), measured(0.1, 0.9, "b", "G")])


def test_verdicts_agree_with_their_adjusted_p_values():
    check_verdict("holds", 0.01, 1.0, 0.05)
    check_verdict("inconclusive", 0.06, 0.9, 0.05)
    check_verdict("inconclusive", NAN, NAN, 0.05)
    for status, p, q in (("holds", 0.06, 1.0), ("inconclusive", 0.04, 1.0), ("fails", 1.0, 0.2)):
        with pytest.raises(ValueError, match="disagrees"):
            check_verdict(status, p, q, 0.05, "x")


def test_row_columns_and_formatting():
    r = decide_family([measured(0.001, 1.0)])[0]
    row = r.row()
    # A verdict fills every claims.csv column but what the part adds: the expectation, and who declared it.
    assert set(TABLES["claims"].columns) - set(row) == {"expected", "profile", "scope", "declaration",
                                                       "declared_in", "check", "estimand", "seeds"}
    assert (row["claim"], row["ranker"], row["versus"], row["measure"], row["claimed"]) == ("c", "a", "b", "strict", "> 0")
    assert row["measured"].startswith("holds: +3.00 pts, descriptive 95% bootstrap interval (unadjusted) [+1.00, +5.00] "
                                      "(claimed > 0; n=100, 50 groups, 30 differing, 45 discordant); holds: one-sided")
    assert (row["differing_groups"], row["discordant"]) == (30, 45)
    assert row["reason"].endswith("; n=100, 50 groups, 30 differing, 45 discordant")
    why = "no anytime-valid test for this measure"
    unmeasured = decide_family([not_measured(definition(), why, "pts", n=4, n_groups=1)])[0].row()
    assert unmeasured["measured"].count(why) == 1 and unmeasured["reason"].count(why) == 1
    assert format_interval(-6.36, -2.91) == "[-6.36, -2.91]" and format_interval(NAN, 1.0) == "[—]"
    assert (format_p(0.0312), format_p(0.00001), format_p(1 / 10_001), format_p(NAN)) == ("0.031", "1e-05", "0.0001", "—")


def window(name: str, **kw) -> RankerDecl:
    kind_name = kw.pop("kind", "llm_grader")
    return RankerDecl(name, kind_name, kind(kind_name), kw.pop("options", {"model": "m"}), **kw)


def test_families_are_fixed_by_the_shipped_declarations():
    windows = [window("ce", kind="cross_encoder"), window("grader"),
               window("grader_expected", options={"model": "m", "grade": "expected"}),
               window("mine", kind="cross_encoder", options={"model": "x"})]
    comparisons = [DeclaredComparison("h1_e0", "H1", "e0", "fusion", "strict", ">", True),
                   DeclaredComparison("my_claim", "", "mine", "fusion", "mrr", "<", False)]
    defs = claim_definitions(comparisons, windows, frozenset({"ce", "grader", "grader_expected"}))
    families = {name: d.family for name, d in defs.items()}
    assert families["h1_e0"] == "H1" and families["my_claim"] == "declared:mine"
    assert families["h2_ce_strict_gt_fusion"] == families["h2_grader_mrr_gt_fusion"] == "H2"
    assert families["h2_mine_strict_gt_fusion"] == families["h2_mine_mrr_gt_fusion"] == "H2:mine"
    assert families["h3_grader_tie_branch_concentrates_failures"] == "H3"
    assert defs["h3_grader_expected_resolves_ties_of_grader"].kind == "tie_resolution"
    assert "h3_ce_tie_branch_concentrates_failures" not in defs  # no bounded grade scale
    with pytest.raises(KeyError, match="no paired measure"):
        claim_definitions([DeclaredComparison("bad", "H1", "e0", "fusion", "recall", ">", True)], [], frozenset())


def directions(groups: list[str]) -> pd.DataFrame:
    n = len(groups)
    return pd.DataFrame({"qid": [f"q{i}" for i in range(n)], "group": groups, "eligible": True})


def outcomes(strict: list[int], name: str) -> pd.DataFrame:
    o = pd.DataFrame({"qid": [f"q{i}" for i in range(len(strict))], "rank_pos": pd.array([pd.NA] * len(strict), "Int64"),
                      "rank_neg": pd.array([pd.NA] * len(strict), "Int64"), "strict": np.array(strict, bool),
                      "tie": False, "fallback": False})
    o.attrs["ranker"] = name
    return o


def test_measure_comparison_by_hand():
    d = directions(["g1", "g1", "g2", "g3", "g4", "g5", "g6"])
    a, b = outcomes([1, 1, 1, 1, 1, 1, 0], "a"), outcomes([0, 1, 0, 0, 0, 0, 1], "b")
    t = measure_comparison(definition(), a, b, d)
    # Group sums (1, 1, 1, 1, 1, -1): 6 groups differ; sign flips alone: P(T* >= 4) = 7/64; the decision test
    # (groups of up to 2 directions, so |D_g| <= 2; 6 < 40 differing groups: guarded) can only say more.
    assert t.effect == pytest.approx(100 * 4 / 7) and (t.n, t.n_groups, t.unit) == (7, 6, "pts")
    assert (t.differing_groups, t.discordant, t.guarded) == (6, 6, True)
    decision = mean_test(np.array([1.0, 1, 1, 1, 1, -1]), 2.0)
    assert t.p_greater == decision.p_greater >= decision.sign_flip.p_greater == pytest.approx(7 / 64)
    assert decision.sign_flip.p_greater == pytest.approx(scipy_p([1, 1, 1, 1, 1, -1], "greater"))
    assert t.null_sd == pytest.approx(100 * math.sqrt(6) / 7)
    assert t.measured.startswith("a: strict 6/7 (85.71%); b on the same 7 directions: strict 2/7 (28.57%)")
    empty = measure_comparison(definition(), a.iloc[:0], b.iloc[:0], d, note="no tie")
    assert math.isnan(empty.effect) and empty.n_groups == 0


def test_tie_branch_test_by_hand():
    """H3: θ = share of failures in the equal branch − share of directions = Σ(e−ē)(f−f̄)/Σf."""
    per = pd.DataFrame({"branch": ["equal_score", "equal_score", "different_score", "equal_score", "different_score",
                                   "outside_window_or_fallback"],
                        "strict": [False, False, True, True, False, True]})
    groups = np.array(["g1", "g1", "g2", "g3", "g3", "g4"])
    h3 = ClaimDefinition("h3", "H3", "tie_branch", "grader", measure="tie_branch_share")
    t = measure_tie_branch(h3, per, groups)
    # e = (1,1,0,1,0,0), f = (1,1,0,0,1,0): failures in equal 2 of 3, directions in equal 3 of 6.
    assert t.effect == pytest.approx(100 * (2 / 3 - 3 / 6))
    e, f = np.array([1, 1, 0, 1, 0, 0.0]), np.array([1, 1, 0, 0, 1, 0.0])
    u = pd.Series((e - e.mean()) * (f - f.mean())).groupby(groups).sum().to_numpy()
    assert t.p_greater == pytest.approx(max(scipy_p(u, "greater"), skew_corrected_p(u)[0]))  # H3: never guarded
    assert t.discordant == 1 and t.flag.startswith("its rarest branch × outcome cell expects")  # 6 × 1/2 × 1/2 < 5
    assert t.null_sd == pytest.approx(100 / 3 * math.sqrt(np.sum(u ** 2)))
    assert (t.n, t.n_groups) == (6, 4) and "3/6 directions" in t.measured
    none_failed = measure_tie_branch(h3, per.assign(strict=True), groups)
    assert math.isnan(none_failed.effect) and "undefined" in none_failed.measured


def _verdict(status: str, p_adj: float, q_adj: float) -> ClaimResult:
    """A comparison's result with the given adjusted p-values (the rest fixed)."""
    d = ClaimDefinition("bg8_strict_lt_e0", "H1", "comparison", "bg8", "e0", "strict", "<")
    return ClaimResult(d, status, -2.0, -4.0, 0.1, "pts", p_adj / 8, p_adj, q_adj / 8, q_adj, 3.0, 0.003, 900.0,
                       371, 96, 8, f"{status}: exact", "measured exactly")


@pytest.mark.parametrize("exact, noisy, published", [
    (("holds", 0.01, 1.0), ("holds", 0.04, 1.0), ("holds", 0.04, 1.0)),                # both hold: the larger p
    (("inconclusive", 0.99, 1.0), ("holds", 0.009, 1.0), ("inconclusive", 0.99, 1.0)),  # the noise decides: not us
    (("holds", 0.009, 1.0), ("inconclusive", 0.2, 1.0), ("inconclusive", 0.2, 1.0)),
    (("fails", 1.0, 0.001), ("fails", 1.0, 0.03), ("fails", 1.0, 0.03)),
    (("fails", 1.0, 0.001), ("holds", 0.01, 1.0), ("inconclusive", 1.0, 1.0)),          # opposite verdicts
])
def test_a_trained_claim_is_decisive_only_where_the_noisy_retraining_agrees(exact, noisy, published) -> None:
    got = robust_to_noise(_verdict(*exact), _verdict(*noisy), "route scores moved by 1e-07 of themselves")
    assert (got.status, got.p_adjusted, got.p_opposite_adjusted) == published
    assert (got.effect, got.lo, got.hi, got.p_value) == (-2.0, -4.0, 0.1, exact[1] / 8)  # the exact inputs' numbers
    assert "retrained on route scores moved by 1e-07 of themselves" in got.measured
    assert ("hinges on floating-point noise" in got.reason) == (exact[0] != noisy[0])


def test_one_p_value_per_claim_everywhere_and_its_family_beside_it() -> None:
    """The published Holm p's (the larger of the exact and the retrained family's) are the ones the reason quotes:
    claims.csv's ``reason``, ``p_adjusted`` and ``p_opposite_adjusted``, the terminal and report.md read the same
    pair; the family's size and members stand beside them."""
    exact = decide_family([measured(0.9999, 0.0001, "e0_strict_gt_fusion", "H1"), measured(0.2, 0.8, "other", "H1")],
                          unmeasured=1)[0]
    noisy = decide_family([measured(0.99, 0.004, "e0_strict_gt_fusion", "H1"), measured(0.2, 0.8, "other", "H1")],
                          unmeasured=1)[0]
    got = robust_to_noise(exact, noisy, "noise")
    assert got.status == "fails" and got.p_opposite_adjusted == pytest.approx(0.004 * 6)
    assert f"(Holm {format_p(got.p_opposite_adjusted)})" in got.reason
    assert f"(Holm {format_p(exact.p_opposite_adjusted)})" not in got.reason.split("(each Holm p")[0]
    assert got.family_members == "3 claims: e0_strict_gt_fusion, other and 1 not measured here"
    assert "6 hypotheses: 3 claims: e0_strict_gt_fusion, other and 1 not measured here" in got.reason
    assert got.row()["family_members"] == got.family_members


def test_the_reason_and_row_count_the_units_the_sample_drew() -> None:
    """The same measured claim on each design: the reason counts its units in the design's words and claims.csv's
    ``units`` names them (source groups unless a sample drew pairs or directions)."""
    d = ClaimDefinition("h2_x_strict_gt_fusion", "H2", "comparison", "x", "fusion", "strict")
    base = ClaimTest(d, 20.0, 8.0, 31.0, 6.0, 0.001, 0.999, 150, 76, "pts", differing_groups=50, discordant=60)
    words = {"groups": "n=150, 76 groups, 50 differing", "pairs": "n=150, 76 pairs, 50 differing",
             "directions": "n=150 single-direction units, 50 differing"}
    for units, text in words.items():
        [result] = decide_family([dataclasses.replace(base, units=units)])
        assert text in result.reason and text in result.summary() and result.row()["units"] == units
    assert decide_family([base])[0].row()["units"] == "groups"
