"""report.md's first screen: each hypothesis in one sentence from its claims, the verdict table (effect with its
decision interval, Holm p, verdict, n; each family's hypotheses once), and where the run departs from its dataset's
reference rows, computed from the claims and the rows (reports.paper.reference_rows), never written in: the paper's
on NevIR only; a [data] set's own declared rows, or none, which the report says."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from reports.bottom_line import DECIDES, VERDICT_COLUMNS, bottom_line, paper_contrast, reference_lines, verdict_table
from reports.paper import paper_table2, read_reference, reference_rows
from reports.record import Publication, SplitRecord
from reports.report_md import report_markdown

#: The manifest's dataset entries: NevIR (also what a record without one means) and the policy example's set.
NEVIR = {"name": "nevir", "kind": "nevir"}
POLICY = {"name": "policy_pairs", "kind": "pairs"}


def line(claims: pd.DataFrame, split: str = "test", n: int | None = 2735, dataset=None) -> list[str]:
    return bottom_line(claims) + reference_lines(claims, reference_rows(dataset or NEVIR, split, n), dataset)

NAN = float("nan")


def claim(name: str, family: str, ranker: str, versus: object, measure: str, claimed: str, status: str,
          effect: float, lo: float, hi: float, unit: str = "pts", seeds: str = "") -> dict[str, object]:
    """A claims.csv row; its decision interval is its bootstrap interval widened by a fifth and, on the side its
    verdict decides, bounded at 0 (an open end: docs/statistics.md#decision-intervals)."""
    width = 0.2 * (hi - lo)
    decision_lo, decision_hi = lo - width, hi + width
    if status != "inconclusive":
        decision_lo, decision_hi = (0.0, decision_hi) if effect > 0 else (decision_lo, 0.0)
    return {"claim": name, "family": family, "ranker": ranker, "versus": versus, "measure": measure,
            "claimed": claimed, "status": status, "effect": effect, "lo": lo, "hi": hi, "unit": unit,
            "seeds": seeds, "decision_lo": decision_lo, "decision_hi": decision_hi, "decision_level": 0.0125,
            "p_adjusted": 0.004 if status == "holds" else 1.0, "p_opposite_adjusted": 0.003 if status == "fails" else 1.0,
            "n": 2735, "n_groups": 699, "units": "groups", "family_hypotheses": 8,
            "family_members": f"4 claims: the {family} members"}


def claims() -> pd.DataFrame:
    """The embedded run's shape on Test: E0 below fusion on strict preference where the paper has it above."""
    return pd.DataFrame([
        claim("h1_e0_strict_gt_fusion", "H1", "e0", "fusion", "strict", "> 0", "fails", -4.64, -6.36, -2.91),
        claim("h1_e0_mrr_lt_fusion", "H1", "e0", "fusion", "mrr", "< 0", "holds", -0.5098, -0.5229, -0.4962, "MRR"),
        claim("h1_bg8_strict_lt_e0", "H1", "bg8", "e0", "strict", "< 0", "inconclusive", -0.48, -2.13, 1.11,
              seeds="mean of seeds 13–17"),
        claim("h1_bg8_strict_lt_e0@seed13", "H1", "bg8", "e0", "strict", "< 0", "holds", -4.0, -6.0, -2.0,
              seeds="seed 13"),
        claim("h2_ce_mrr_gt_fusion", "H2", "ce", "fusion", "mrr", "> 0", "fails", -0.1686, -0.18, -0.157, "MRR"),
        claim("h2_mine_strict_gt_fusion", "H2:mine", "mine", "fusion", "strict", "> 0", "holds", 3.0, 1.0, 5.0),
        claim("h3_grader_pairs_tie_branch", "H3", "grader_pairs", NAN, "tie_branch_share", "> 0", "holds", 6.49,
              1.85, 11.73),
        {"claim": "pin:fusion.n", "family": "pin", "status": "unchanged"},
    ])


def test_each_hypothesis_is_one_sentence_of_its_claims_with_effect_and_interval() -> None:
    lines = line(claims())
    assert lines[0] == "## Bottom line"
    sentences = [line for line in lines if line.startswith("- **H") or line.startswith("- **Beyond")]
    assert [s.split("**")[1].split(" ")[0] for s in sentences] == ["H1", "H2", "H3"]
    h1, h2, _ = sentences
    assert "`e0` vs `fusion`, strict preference **fails** (-4.64 pts)" in h1
    assert "`bg8` vs `e0`, strict preference **inconclusive** (-0.48 pts, mean of seeds 13–17)" in h1
    assert "-4.00" not in h1  # the single-seed replay is not the hypothesis' verdict
    assert "`mine` vs `fusion`, strict preference **holds** (+3.00 pts)" in h2  # a user's family
    assert "pin:" not in "\n".join(lines)


def test_the_departures_from_the_paper_follow_the_sign_of_its_published_values() -> None:
    contrast = paper_contrast(claims(), reference_rows(NEVIR, "test", 2735))
    assert contrast is not None and contrast.agrees == 1  # E0's MRR below fusion's, as in the paper
    paper = paper_table2("test").set_index("ranker")
    assert paper.at["e0", "strict_pct"] > paper.at["fusion", "strict_pct"]  # what makes the first a departure
    assert len(contrast.departs) == 2
    assert "the paper has `e0` above `fusion` (56.62 vs 52.30); this run has it below." in contrast.departs[0]
    assert "the paper has `ce` above `fusion` (0.7404 vs 0.5764); this run has it below." in contrast.departs[1]
    assert contrast.undecided == ("`bg8` vs `e0`, strict preference **inconclusive** (-0.48 pts, mean of seeds 13–17): "
                                  "the paper has `bg8` below `e0` (54.53 vs 56.62); this run does not decide it.",)
    text = "\n".join(line(claims()))
    assert "this run decides 1 its way, 2 the other way and 1 not at all" in text


def test_a_run_that_agrees_with_the_paper_says_so_and_other_splits_are_not_compared() -> None:
    agreeing = claims()
    agreeing.loc[0, ["status", "effect", "lo", "hi"]] = ["holds", 4.3, 2.0, 6.5]
    agreeing = agreeing.drop(index=[2, 4])
    text = "\n".join(line(agreeing))
    assert "all 2 claims its values give a direction for are decided its way" in text
    confirmation = "\n".join(line(claims(), "confirmation", 371))
    assert "Against the paper" not in confirmation and "**H1" in confirmation
    assert line(pd.DataFrame([{"claim": "pin:x", "family": "pin", "status": "unchanged"}]), n=1) == []


def test_a_claim_that_names_no_ranker_is_named_by_itself() -> None:
    """A profile's own claim row may carry only its name, status and measured text (no ranker, no effect)."""
    lines = line(pd.DataFrame([{"claim": "h_demo", "status": "holds", "measured": "+1 pts"}]), n=10)
    assert lines[:3] == ["## Bottom line", "", "- **Beyond the paper**: `h_demo` **holds** (+1 pts)."]


#: Every number the paper's rows hold, as the report would print them: none may appear in another dataset's report.
PAPER_NUMBERS = ("0.7404", "0.5764", "56.62", "52.30", "54.53", "2736", "2,736", "Preference Is Not Position (Sec")


def policy_record(dataset: dict) -> SplitRecord:
    """The policy example's shape on its one split: fusion, the cross-encoder and a MiniLM window, two H2 claims."""
    table2 = pd.DataFrame([{"ranker": r, "n": 72, "strict": s, "strict_pct": 100 * s / 72, "mrr": m}
                           for r, s, m in (("fusion", 40, 0.61), ("ce", 50, 0.70), ("minilm_window", 38, 0.55))])
    return SplitRecord("test", {"table2": table2, "claims": claims_of_policy()},
                       {"profile": {"name": "policy-pairs"}, "dataset": dataset})


def claims_of_policy() -> pd.DataFrame:
    rows = [
        claim("h2_ce_strict_gt_fusion", "H2", "ce", "fusion", "strict", "> 0", "inconclusive", 13.9, -2.0, 30.0),
        claim("h2_ce_mrr_gt_fusion", "H2", "ce", "fusion", "mrr", "> 0", "holds", 0.09, 0.02, 0.16, "MRR"),
        claim("h2_minilm_window_mrr_gt_fusion", "H2:minilm_window", "minilm_window", "fusion", "mrr", "> 0",
              "inconclusive", -0.06, -0.15, 0.03, "MRR"),
    ]
    return pd.DataFrame([{**r, "n": 72, "n_groups": 36, "p_adjusted": 0.2, "p_opposite_adjusted": 1.0,
                          "reason": "36 pairs"} for r in rows])


def test_another_dataset_s_report_names_no_paper_numbers_and_says_it_has_no_reference() -> None:
    """The policy example's report.md, rendered from its record: the bottom line compares with nothing and says why,
    and no section shows the paper's Table II or the published NevIR figures."""
    text = report_markdown(policy_record(POLICY), policy_record(POLICY).tables, {}, [], Publication("run-1"))
    assert "No reference results: the dataset `policy_pairs` declares none (`[data] reference`)" in text
    assert "Against the paper" not in text and "the paper has" not in text
    assert "## Reference" not in text and "published NevIR" not in text
    assert not [number for number in PAPER_NUMBERS if number in text]
    nevir = report_markdown(policy_record(NEVIR), policy_record(NEVIR).tables, {}, [], Publication("run-1"))
    assert "Against the paper" in nevir and "(69.77 vs 52.30)" in nevir  # the same claims on NevIR are compared


def test_a_dataset_s_declared_reference_rows_are_its_bottom_line_s(tmp_path: Path) -> None:
    path = tmp_path / "reference.csv"
    path.write_text("source,split,ranker,strict_pct,mrr\n"
                    "Policy study 2026 (hand-labelled),test,fusion,50.0,0.60\n"
                    "Policy study 2026 (hand-labelled),test,ce,72.0,0.58\n", encoding="utf-8")
    dataset = {**POLICY, "reference": read_reference(path)}
    lines = "\n".join(reference_lines(claims_of_policy(), reference_rows(dataset, "test"), dataset))
    assert "Against the reference (Policy study 2026 (hand-labelled))" in lines
    assert "the reference has `ce` below `fusion` (0.5800 vs 0.6000); this run has it above." in lines
    assert "the reference has `ce` above `fusion` (72.00 vs 50.00); this run does not decide it." in lines
    assert reference_rows(dataset, "confirmation") is None  # rows for another split only
    text = report_markdown(policy_record(dataset), policy_record(dataset).tables, {}, [], Publication("run-1"))
    assert "## Reference: Policy study 2026 (hand-labelled) (not this run)" in text and "0.7404" not in text


@pytest.mark.parametrize("body, message", [
    ("source,split,ranker\nx,test,fusion\n", "at least one Table II column"),
    ("source,split,ranker,colour\nx,test,fusion,1\n", "unknown: \\['colour'\\]"),
    ("source,split,ranker,mrr\nx,test,,0.5\n", ":2: field 'ranker' is empty"),
    ("source,split,ranker,mrr\nx,test,fusion,high\n", ":2: field 'mrr' must be a number, got 'high'"),
    ("source,split,ranker,mrr\n", "no reference rows"),
])
def test_a_bad_reference_file_is_named_by_file_line_and_field(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "reference.csv"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        read_reference(path)


def full_run_claims() -> pd.DataFrame:
    """The embedded full run's twelve study claims on Test (H1 4, H2 5, H3 2, H3x 1), a single-seed twin and a pin."""
    rows = [claim(f"h2_r{k}_strict_gt_fusion", "H2", f"r{k}", "fusion", "strict", "> 0", "inconclusive", 1.0 + k,
                  -2.0, 4.0 + k) for k in range(5)]
    rows += [claim(f"h3_g{k}_tie_branch_concentrates_failures", "H3", f"g{k}", NAN, "tie_branch_share", "> 0", "holds",
                   7.0, 1.0, 14.0) for k in range(2)]
    rows += [claim("h3_ge_resolves_ties_of_g0", "H3x", "ge", "g0", "strict", "> 0", "holds", 20.75, 9.0, 31.0)]
    return pd.concat([claims().iloc[[0, 1, 2, 3]], pd.DataFrame([claim("h1_bg8_mrr_gt_e0", "H1", "bg8", "e0", "mrr",
                      "> 0", "holds", 0.55, 0.53, 0.57, "MRR", "mean of seeds 13–17")]), pd.DataFrame(rows)],
                     ignore_index=True)


def test_the_first_screen_is_the_bottom_line_and_one_verdict_table() -> None:
    """report.md's first 30 lines hold the bottom line and the verdict table with every study claim (not the
    single-seed twin); the table says what decides once, each row's effect with its decision interval, seeds beside
    a seed-averaged effect, and each family's hypotheses are listed once, under it."""
    frame = full_run_claims()
    table2 = pd.DataFrame([{"ranker": "fusion", "n": 2735, "strict": 1387}])
    record = SplitRecord("test", {"table2": table2, "claims": frame}, {"profile": {"name": "embedded"}})
    text = report_markdown(record, record.tables, {}, [], Publication("run-1"))
    first = text.splitlines()[:30]
    study = [c for c in frame["claim"] if "@" not in c and c.startswith("h")]
    assert len(study) == 12 and "## Bottom line" in first and "## Verdicts" in first and DECIDES in first
    assert all(any(f"| `{c}` " in line for line in first) for c in study)
    assert not any("@seed13" in line for line in first)
    assert text.count(DECIDES) == 1 and text.count("4 claims: the H1 members") == 1
    header = next(line for line in first if line.startswith("| claim"))
    assert [c.strip() for c in header.strip("|").split("|")] == list(VERDICT_COLUMNS)
    fails = next(line for line in first if "`h1_e0_strict_gt_fusion`" in line)
    assert "-4.64 pts [-7.05, 0)" in fails and "1 / 0.003" in fails and "**fails**" in fails and "2,735 (699 groups)" in fails
    seeded = next(line for line in first if "`h1_bg8_strict_lt_e0`" in line)
    assert "-0.48 pts, mean of seeds 13–17 [-2.78, +1.76]" in seeded
    holds = verdict_table(frame)[4:]
    assert any("+20.75 pts (0, +35.40]" in line for line in holds)
