"""report.md and table2.tex as a reader meets them: verdicts in words first, each ranker's label, Δ against
each row's own baseline, held gates and pins in one line, and tiny samples' intervals with a note."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from reports.measures import TABLE2_ROW_COLUMNS
from reports.sequential import StoppingPoint
from reports.record import NotEvaluated, SplitRecord
from reports.render import table2_latex
from reports.report_md import verdict_sentence
from reports.writer import publish, with_labels

NAN = float("nan")
DECLARED = {"fusion": {"kind": "fusion", "label": "fixed fusion", "compare_to": "fusion"},
            "ce": {"kind": "cross_encoder", "label": "cross-encoder window", "compare_to": "fusion"},
            "grader": {"kind": "llm_grader", "label": "LLM grader window", "compare_to": "ce"}}


def t2_row(name: str, n: int, strict: int, lo: float, hi: float, delta: float = NAN, dlo: float = NAN,
           dhi: float = NAN) -> dict[str, object]:
    row = dict.fromkeys(TABLE2_ROW_COLUMNS, NAN)
    row.update({"ranker": name, "n": n, "strict": strict, "strict_pct": 100.0 * strict / n, "strict_pct_lo": lo,
                "strict_pct_hi": hi, "paired_pct": 0.0, "mrr": 0.5, "pref_at_1": 10.0, "ties": 0, "fallback": 0,
                "mean_rank_pos": 2.0, "mean_rank_neg": 3.0, "delta_pts": delta, "delta_lo": dlo, "delta_hi": dhi})
    return row


def claim(name: str, family: str, status: str, **values: object) -> dict[str, object]:
    return {"claim": name, "family": family, "status": status, **values}


def run_tables() -> dict[str, pd.DataFrame]:
    table2 = pd.DataFrame([t2_row("fusion", 48, 27, 50.0, 66.67),
                           t2_row("ce", 48, 25, 45.83, 58.33, -4.17, -16.67, 6.25),
                           t2_row("grader", 4, 4, 100.0, 100.0, 25.0, 0.0, 50.0)])
    measured = {"unit": "pts", "claimed": "> 0", "n_groups": 12}
    claims = pd.DataFrame([
        claim("gate:coverage_pct_min", "gate", "holds", expected="holds", measured="100 (limit 90)"),
        claim("gate:fallback_pct_max:ce", "gate", "holds", expected="holds", measured="0 (limit 0)"),
        claim("h1_ce_mrr_gt_fusion", "H1", "holds", ranker="ce", versus="fusion", measure="mrr", effect=0.0123,
              lo=0.0045, hi=0.0201, unit="MRR", claimed="> 0", n=48, n_groups=12, p_adjusted=0.004,
              p_opposite_adjusted=1.0, family_hypotheses=2, family_members="1 claim: h1_ce_mrr_gt_fusion"),
        claim("h2_ce_strict_gt_fusion", "H2", "fails", ranker="ce", versus="fusion", measure="strict", effect=-4.17,
              lo=-16.67, hi=-1.25, n=48, p_adjusted=1.0, p_opposite_adjusted=0.03, **measured),
        claim("h2_grader_strict_gt_ce", "H2", "inconclusive", ranker="grader", versus="ce", measure="strict",
              effect=25.0, lo=25.0, hi=25.0, unit="pts", claimed="> 0", n=4, n_groups=1, p_adjusted=NAN,
              p_opposite_adjusted=NAN),
        claim("h3_grader_tie_branch_concentrates_failures", "H3", "inconclusive", ranker="grader", versus=NAN,
              measure="tie_branch_share", effect=2.0, lo=-3.0, hi=7.0, n=48, p_adjusted=0.5,
              p_opposite_adjusted=1.0, mde=9.5, directions_needed=1200, **measured),
        claim("h3_mine_resolves_ties_of_grader", "H3x:mine", "inconclusive", ranker="mine", versus="grader",
              measure="strict", effect=1.0, lo=-2.0, hi=4.0, n=48, p_adjusted=0.7, p_opposite_adjusted=1.0,
              **measured),
        claim("pin:fusion.strict", "pin", "unchanged", expected="27 ± 0", measured="unchanged: then 27, now 27"),
        claim("pin:fusion.n", "pin", "unchanged", expected="48 ± 0", measured="unchanged: then 48, now 48"),
        claim("pin:ce.strict", "pin", "changed", expected="21 ± 0", measured="changed: then 21, now 25, Δ +4"),
    ])
    return {"table2": table2, "claims": claims}


ENTRIES = {"code_commit": "abc123", "profile": {"name": "embedded", "rankers": DECLARED}}


def run_record(**tables: pd.DataFrame) -> SplitRecord:
    return SplitRecord("test", {**run_tables(), **tables}, ENTRIES)


def published(tmp_path: Path) -> Path:
    failed = NotEvaluated("specs/test_x.py::test_y[test-bg8]", "failed", "boom")
    [folder] = publish(tmp_path, "r1", {"test": run_record()}, exitstatus=1, not_evaluated={"test": [failed]}).values()
    return folder


def test_report_opens_with_each_family_s_verdicts_in_words(tmp_path: Path) -> None:
    report = (published(tmp_path) / "report.md").read_text(encoding="utf-8")
    sections = [line for line in report.splitlines() if line.startswith("## ")]
    assert sections[:6] == ["## Bottom line", "## Verdicts", "## Each verdict, with its numbers and why",
                            "## Table II: preference and position per ranker", "## Gates and pins",
                            "## Failed or skipped (their rows are missing; everything else is published)"]
    verdicts = report.split("## Each verdict")[1].split("## Table II")[0]
    headings = [line for line in verdicts.splitlines() if line.startswith("### ")]
    assert [h.split(":")[0] for h in headings] == ["### H1", "### H2", "### H3",
                                                   "### Beyond the paper (and claims of no study family)"]
    assert ("- **holds** — `ce` (cross-encoder window) vs `fusion`, preferred-passage MRR: +0.0123 MRR; descriptive "
            "95% bootstrap interval (unadjusted) [+0.0045, +0.0201] (claimed > 0), n = 48 directions in 12 source "
            "groups; Holm-adjusted one-sided p 0.004 on the claimed side, 1 on the other in family H1 (2 hypotheses).") \
        in verdicts
    assert report.count("1 claim: h1\\_ce\\_mrr\\_gt\\_fusion") == 1  # the family's hypotheses: listed once
    assert "Of 2 claims: 0 hold, 1 fail, 1 inconclusive (not decided by this run)." in verdicts
    assert ("- **inconclusive** — `grader` (LLM grader window) vs `ce`, strict preference: +25.00 pts; descriptive "
            "95% bootstrap interval (unadjusted) [+25.00, +25.00] (n=4: interval unreliable) (claimed > 0), n = 4 "
            "directions in 1 source group; unable to decide") in verdicts
    assert ("`grader` (LLM grader window), equal-grade branch, share of non-successes minus share of directions: "
            "+2.00 pts; descriptive 95% bootstrap interval (unadjusted) [-3.00, +7.00] (claimed > 0), n = 48 "
            "directions in 12 source groups; Holm-adjusted one-sided p 0.5 on the claimed side, 1 on the other; MDE "
            "9.50 pts; about 1,200 directions would give 80% power at this effect.") in verdicts
    assert "strict preference on the equal-grade directions of `grader`" in verdicts and "(family H3x:mine)" in verdicts
    assert "gate:" not in verdicts and "pin:" not in verdicts


def test_a_sequential_claim_s_verdict_says_where_its_sample_stopped(tmp_path: Path) -> None:
    stop = {"sample": "grader_pairs", "look": 9, "stop_groups": 36, "stop_directions": 144, "stop_judgments": 288,
            "stop": "budget", "stop_reason": "budget spent: the next look needs 304 judgments, over the 300 allowed"}
    sequential = pd.DataFrame([
        {"claim": "h2_grader_strict_gt_ce", "groups": 36, "directions": 144, "p_greater": 0.004, "p_less": 1.0, **stop,
         "decided_look": 3, "decided_after_groups": 12, "decided_directions": 48, "decided_judgments": 96, "note": ""},
        {"claim": "h3_grader_tie_branch_concentrates_failures", **stop, "note": "no anytime-valid test"}])
    [folder] = publish(tmp_path, "r1", {"test": run_record(sequential=sequential)}).values()
    verdicts = (folder / "report.md").read_text(encoding="utf-8").split("## Each verdict")[1].split("## Table II")[0]
    spent = ("The sequential sample grader\\_pairs stopped at look 9: 36 groups, 144 directions, 288 judgments "
             "(budget spent: the next look needs 304 judgments, over the 300 allowed)")
    assert (f"unable to decide: too few source groups for any outcome to reach α, so it is left out of its family. "
            f"{spent}; decided at look 3 (12 groups, 48 directions, 96 judgments).") in verdicts
    assert f"at this effect. {spent}.\n" in verdicts  # the tie-branch claim: no look decided it
    assert verdicts.count("The sequential sample") == 2  # the claims off the sample say nothing of it
    unmeasured = {**run_tables()["claims"].iloc[5].to_dict(), "effect": NAN, "measured": "not measured: no test"}
    assert verdict_sentence(unmeasured, {}, StoppingPoint.from_row(stop)).endswith(
        f"equal-grade branch, share of non-successes minus share of directions: not measured: no test. {spent}.")


def test_held_gates_and_pins_collapse_and_a_moved_pin_is_listed_in_full(tmp_path: Path) -> None:
    report = (published(tmp_path) / "report.md").read_text(encoding="utf-8")
    part = report.split("## Gates and pins")[1].split("\n## ")[0]
    assert "All 2 gates hold." in part
    assert "1 of 3 pins moved (changed or undetermined):" in part
    assert "| pin:ce.strict | changed  | 21 ± 0     | changed: then 21, now 25, Δ +4 |" in part
    assert "pin:fusion.strict" not in report and "pin:fusion.n" not in report  # held pins: counted, not listed
    assert "- `specs/test_x.py::test_y[test-bg8]` failed: boom" in report


def test_table2_carries_labels_baselines_and_tiny_sample_notes(tmp_path: Path) -> None:
    folder = published(tmp_path)
    csv = pd.read_csv(folder / "table2.csv", keep_default_na=False)
    assert list(csv.columns[-3:]) == ["label", "compare_to", "seeds"]  # after the contract columns and intervals
    assert csv["label"].tolist() == ["fixed fusion", "cross-encoder window", "LLM grader window"]
    assert csv["compare_to"].tolist() == ["", "fusion", "ce"]  # no Δ, no baseline
    report = (folder / "report.md").read_text(encoding="utf-8")
    table = report.split("## Table II")[1].split("\n## ")[0]
    grader = next(line for line in table.splitlines() if line.startswith("| grader"))
    cells = [c.strip() for c in grader.strip("|").split("|")]
    assert cells[:5] == ["grader", "LLM grader window", "4", "4", "100.00 [100.00, 100.00] (n=4: interval unreliable)"]
    assert cells[-3:] == ["ce", "25.00 [0.00, 50.00] (n=4: interval unreliable)", "--"]  # no nDCG@10 in this row
    ce = [c.strip() for c in next(line for line in table.splitlines() if line.startswith("| ce")).strip("|").split("|")]
    assert ce[4] == "52.08 [45.83, 58.33]" and ce[-3:-1] == ["fusion", "-4.17 [-16.67, 6.25]"]


def test_table2_tex_caption_names_each_row_s_baseline_split_profile_and_commit() -> None:
    tables = run_tables()
    frame = with_labels(tables["table2"], run_record().declared)
    tex = table2_latex(frame, "test", "my_profile", "abc123")
    caption = next(line for line in tex.splitlines() if line.startswith(r"\caption{"))
    assert caption == (r"\caption{Preference and position on NevIR test (profile my\_profile, commit abc123). "
                       r"Intervals: 95\% source-group bootstrap (2,000 resamples), marked unreliable over fewer than "
                       r"20 directions or when of zero width. $\Delta$ strict: each row against its own "
                       r"\texttt{compare\_to} baseline (column Baseline; rows may have different baselines), paired "
                       r"on that row's $n$ directions.}")
    assert "ranker's reference" not in caption
    rows = tex.split(r"\midrule")[1].split(r"\bottomrule")[0].strip().splitlines()
    assert rows[2] == (r"grader & 4 & 100.00 [100.00, 100.00] (n=4: interval unreliable) & 0.00 & 0.5000 & 10.00 & 0 "
                       r"& ce & 25.00 [0.00, 50.00] (n=4: interval unreliable) & -- & LLM grader window \\")
    assert rows[1].startswith("ce & 48 & 52.08 [45.83, 58.33] & ") and rows[1].endswith(
        r"& fusion & -4.17 [-16.67, 6.25] & -- & cross-encoder window \\")
    assert rows[0].endswith(r"& 0 &  & -- & -- & fixed fusion \\")


def test_without_declarations_the_label_is_the_ranker_s_name(tmp_path: Path) -> None:
    record = SplitRecord("test", run_tables(), {"profile": {"name": "bare"}})
    [folder] = publish(tmp_path, "r1", {"test": record}).values()
    assert pd.read_csv(folder / "table2.csv")["label"].tolist() == ["fusion", "ce", "grader"]
    assert json.loads((folder / "manifest.json").read_text())["profile"] == {"name": "bare"}


def test_a_claim_names_the_units_its_sample_drew() -> None:
    """A claim decided on a sample of single directions names no source groups; one on complete pairs counts pairs;
    one on whole groups (or the full population) counts source groups."""
    row = claim("h2_grader_strict_gt_fusion", "H2", "holds", ranker="grader", versus="fusion", measure="strict",
                effect=19.33, lo=8.67, hi=30.0, n=150, n_groups=150, units="directions", unit="pts", claimed="> 0",
                p_adjusted=0.0054, p_opposite_adjusted=1.0)
    assert "n = 150 directions, each its own unit;" in verdict_sentence(row, {})
    assert "n = 150 directions in 76 complete pairs, one pair a unit;" in verdict_sentence(
        {**row, "n_groups": 76, "units": "pairs"}, {})
    assert "n = 150 directions in 38 source groups;" in verdict_sentence({**row, "n_groups": 38, "units": "groups"}, {})
