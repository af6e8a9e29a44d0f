"""Which family decided each claim, and why equal numbers can get another verdict in another family: a user's ranker
that reproduces the study's cross-encoder is decided in its own two-claim family, the study's in H2's ten."""
from __future__ import annotations

import pandas as pd

from reports.claim_families import FAMILY_RULE, decided_in, same_numbers_elsewhere
from reports.render import brief, md_escape, terminal_tables
from reports.report_md import verdict_lines

SHARED = {"versus": "fusion", "measure": "strict", "claimed": "> 0", "effect": 2.5, "lo": -0.4, "hi": 5.3, "n": 2735,
          "n_groups": 700, "units": "groups", "unit": "pts", "p_opposite_adjusted": 1.0}


def _claims() -> pd.DataFrame:
    return pd.DataFrame([
        {"claim": "h2_ce_strict_gt_fusion", "family": "H2", "ranker": "ce", "status": "inconclusive",
         "p_adjusted": 0.09, "family_hypotheses": 10, **SHARED},
        {"claim": "h2_rr_strict_gt_fusion", "family": "H2:rr", "ranker": "rr", "status": "holds",
         "p_adjusted": 0.02, "family_hypotheses": 4, **SHARED},
        {"claim": "h2_ce_mrr_gt_fusion", "family": "H2", "ranker": "ce", "status": "fails", "p_adjusted": 1.0,
         "family_hypotheses": 10, **{**SHARED, "measure": "mrr", "effect": -0.169, "unit": "MRR"}},
        {"claim": "gate:coverage_pct_min", "family": "gate", "status": "holds", "measured": "99 (limit 90)"},
    ])


def test_a_claim_with_anothers_numbers_and_another_verdict_names_that_claim_and_both_families() -> None:
    rows = _claims().to_dict("records")
    elsewhere = same_numbers_elsewhere(rows)
    assert {k: v["claim"] for k, v in elsewhere.items()} == {"h2_ce_strict_gt_fusion": "h2_rr_strict_gt_fusion",
                                                             "h2_rr_strict_gt_fusion": "h2_ce_strict_gt_fusion"}
    lines = verdict_lines(_claims(), {})
    assert md_escape(FAMILY_RULE) in lines
    [mine] = [line for line in lines if line.startswith("- **holds**")]
    assert ("`h2_ce_strict_gt_fusion` measures the same effect on the same directions and is **inconclusive** in "
            "family H2 (10 hypotheses), this one in H2:rr (4 hypotheses)") in mine
    [study] = [line for line in lines if line.startswith("- **inconclusive**")]
    assert "`h2_rr_strict_gt_fusion` measures the same effect" in study
    assert "and **holds** in family H2:rr (4 hypotheses)" in study
    [mrr] = [line for line in lines if line.startswith("- **fails**")]
    assert "Equal numbers" not in mrr  # another effect: nothing to explain


def test_equal_numbers_with_the_same_verdict_or_in_the_same_family_need_no_word() -> None:
    claims = _claims()
    claims.loc[1, "status"] = "inconclusive"
    assert same_numbers_elsewhere(claims.to_dict("records")) == {}
    claims.loc[1, ["status", "family"]] = ["holds", "H2"]
    assert same_numbers_elsewhere(claims.to_dict("records")) == {}
    study_only = _claims().iloc[[0, 2, 3]]
    assert md_escape(FAMILY_RULE) not in verdict_lines(study_only, {})  # the study's families alone: no rule to say


def test_the_terminal_claims_table_shows_the_family_that_decided_each_claim_and_its_size() -> None:
    shown = brief("claims", _claims())
    assert list(shown.columns) == ["claim", "status", "decided_in", "measured"]
    assert shown["decided_in"].tolist() == ["H2 (10 hypotheses)", "H2:rr (4 hypotheses)", "H2 (10 hypotheses)", "gate"]
    assert "H2:rr (4 hypotheses)" in terminal_tables("claims", _claims())
    assert decided_in(float("nan"), float("nan")) == "" and decided_in("H1", 8.0) == "H1 (8 hypotheses)"


def test_an_inconclusive_claim_says_how_many_of_its_designs_units_would_decide_it() -> None:
    """claims.csv's directions_needed (the decision test simulated on the claim's own sample) in the units the design
    draws: complete pairs for a sample of pairs, source groups at the claim's mean group size for whole groups."""
    from reports.report_md import verdict_sentence

    row = {"claim": "h2_mine_strict_gt_fusion", "family": "H2:mine", "ranker": "mine", "status": "inconclusive",
           "p_adjusted": 0.4, "family_hypotheses": 4, "mde": 9.1, "directions_needed": 1201.0, "mde_test": "",
           **{**SHARED, "n": 150, "n_groups": 75, "units": "pairs"}}
    assert "about 1,201 directions (about 601 complete pairs) would give 80% power" in verdict_sentence(row, {})
    groups = {**row, "n": 30, "n_groups": 15, "units": "groups"}
    assert "about 1,201 directions (about 601 source groups) would give 80% power" in verdict_sentence(groups, {})
    single = {**row, "units": "directions", "n_groups": 150}
    assert "about 1,201 directions would give 80% power" in verdict_sentence(single, {})
