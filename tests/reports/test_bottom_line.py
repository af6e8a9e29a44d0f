"""report.md's bottom line: each hypothesis in one sentence from its claims, and where the run departs from the
paper, computed from the claims and the paper's published values (reports.paper), never written in."""
from __future__ import annotations

import pandas as pd

from reports.paper import paper_table2
from reports.report_md import bottom_line, paper_contrast

NAN = float("nan")


def claim(name: str, family: str, ranker: str, versus: object, measure: str, claimed: str, status: str,
          effect: float, lo: float, hi: float, unit: str = "pts", estimand: str = "") -> dict[str, object]:
    return {"claim": name, "family": family, "ranker": ranker, "versus": versus, "measure": measure,
            "claimed": claimed, "status": status, "effect": effect, "lo": lo, "hi": hi, "unit": unit,
            "estimand": estimand}


def claims() -> pd.DataFrame:
    """The embedded run's shape on Test: E0 below fusion on strict preference where the paper has it above."""
    return pd.DataFrame([
        claim("h1_e0_strict_gt_fusion", "H1", "e0", "fusion", "strict", "> 0", "fails", -4.64, -6.36, -2.91),
        claim("h1_e0_mrr_lt_fusion", "H1", "e0", "fusion", "mrr", "< 0", "holds", -0.5098, -0.5229, -0.4962, "MRR"),
        claim("h1_bg8_strict_lt_e0", "H1", "bg8", "e0", "strict", "< 0", "inconclusive", -0.48, -2.13, 1.11),
        claim("h1_e0_strict_gt_fusion@seed13", "H1", "e0", "fusion", "strict", "> 0", "holds", 4.0, 2.0, 6.0,
              estimand="single seed 13"),
        claim("h2_ce_mrr_gt_fusion", "H2", "ce", "fusion", "mrr", "> 0", "fails", -0.1686, -0.18, -0.157, "MRR"),
        claim("h2_mine_strict_gt_fusion", "H2:mine", "mine", "fusion", "strict", "> 0", "holds", 3.0, 1.0, 5.0),
        claim("h3_grader_pairs_tie_branch", "H3", "grader_pairs", NAN, "tie_branch_share", "> 0", "holds", 6.49,
              1.85, 11.73),
        {"claim": "pin:fusion.n", "family": "pin", "status": "unchanged"},
    ])


def test_each_hypothesis_is_one_sentence_of_its_claims_with_effect_and_interval() -> None:
    lines = bottom_line(claims(), "test", 2735)
    assert lines[0] == "## Bottom line"
    sentences = [line for line in lines if line.startswith("- **H") or line.startswith("- **Beyond")]
    assert [s.split("**")[1].split(" ")[0] for s in sentences] == ["H1", "H2", "H3"]
    h1, h2, _ = sentences
    assert "`e0` vs `fusion`, strict preference **fails** (-4.64 pts [-6.36, -2.91])" in h1
    assert "`bg8` vs `e0`, strict preference **inconclusive** (-0.48 pts [-2.13, +1.11])" in h1
    assert "+4.00" not in h1  # the single-seed replay is not the hypothesis' verdict
    assert "`mine` vs `fusion`, strict preference **holds** (+3.00 pts [+1.00, +5.00])" in h2  # a user's family
    assert "pin:" not in "\n".join(lines)


def test_the_departures_from_the_paper_follow_the_sign_of_its_published_values() -> None:
    contrast = paper_contrast(claims(), "test", 2735)
    assert contrast is not None and contrast.agrees == 1  # E0's MRR below fusion's, as in the paper
    paper = paper_table2("test").set_index("ranker")
    assert paper.at["e0", "strict_pct"] > paper.at["fusion", "strict_pct"]  # what makes the first a departure
    assert len(contrast.departs) == 2
    assert "the paper has `e0` above `fusion` (56.62 vs 52.30); this run has it below." in contrast.departs[0]
    assert "the paper has `ce` above `fusion` (0.7404 vs 0.5764); this run has it below." in contrast.departs[1]
    assert contrast.undecided == ("`bg8` vs `e0`, strict preference **inconclusive** (-0.48 pts [-2.13, +1.11]): the "
                                  "paper has `bg8` below `e0` (54.53 vs 56.62); this run does not decide it.",)
    text = "\n".join(bottom_line(claims(), "test", 2735))
    assert "this run decides 1 its way, 2 the other way and 1 not at all" in text


def test_a_run_that_agrees_with_the_paper_says_so_and_other_splits_are_not_compared() -> None:
    agreeing = claims()
    agreeing.loc[0, ["status", "effect", "lo", "hi"]] = ["holds", 4.3, 2.0, 6.5]
    agreeing = agreeing.drop(index=[2, 4])
    text = "\n".join(bottom_line(agreeing, "test", 2735))
    assert "all 2 claims its published values give a direction for are decided its way" in text
    confirmation = "\n".join(bottom_line(claims(), "confirmation", 371))
    assert "Against the paper" not in confirmation and "**H1" in confirmation
    assert bottom_line(pd.DataFrame([{"claim": "pin:x", "family": "pin", "status": "unchanged"}]), "test", 1) == []


def test_a_claim_that_names_no_ranker_is_named_by_itself() -> None:
    """A profile's own claim row may carry only its name, status and measured text (no ranker, no effect)."""
    lines = bottom_line(pd.DataFrame([{"claim": "h_demo", "status": "holds", "measured": "+1 pts"}]), "test", 10)
    assert lines[:3] == ["## Bottom line", "", "- **Beyond the paper**: `h_demo` **holds** (+1 pts)."]
