"""Checks answer to the file that declares them: expectations, gates and pins name their declaring file, fail only
the runs of the profile that declares them (or with ``inherit_checks``), and subset runs check ``expect`` too
(docs/statistics.md#expectations, #gates, #inherited-checks)."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

import harness.checks as checks
from harness.claims import definitions
from harness.profile import load_profile
from harness.profile_records import ProfileError
from harness.profile_terms import PROFILE_DIR
from reports.claim_measures import ClaimTest
from reports.hypotheses import decide_family
from reports.report_md import inherited_misses, lost_expectations, undecidable_on_subset
from tests.support.checks import check_claim, check_gates

EMBEDDED = (PROFILE_DIR / "embedded.toml").resolve()
#: A study profile of its own (as a lab would copy the embedded one), extended by a user's profile below.
STUDY = '''[profile]
name = "study"
extends = "embedded"
[claims.h2_ce_strict_gt_fusion]
expect = "holds"
[gates]
coverage_pct_min = 95.0
[gates.ce]
fallback_pct_max = 2.0
[pins.full.test]
fusion = { n = 2735, strict = 1390 }
'''
USER = '''[profile]
name = "mine"
extends = "study.toml"
{head}
[rankers.mine]
kind = "python"
factory = "tests.support.sequential_scorers:coin"
order = 45
[claims.h2_mine_mrr_gt_fusion]
expect = "holds"
[claims.h2_ce_strict_gt_fusion]
reason = "a note of mine, not an expectation"
[gates]
fallback_pct_max = 5.0
[gates.mine]
strict_pct_min = 40.0
mrr_min = 0.3
'''


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path.resolve()


@pytest.fixture
def chain(tmp_path: Path) -> SimpleNamespace:
    study = write(tmp_path, "study.toml", STUDY)
    user = write(tmp_path, "mine.toml", USER.format(head=""))
    strict = write(tmp_path, "strict.toml", USER.format(head="inherit_checks = true").replace('"mine"', '"strict"', 1))
    return SimpleNamespace(study=study, user=user, strict=strict)


def test_every_check_knows_the_file_that_declared_it(chain) -> None:
    profile = load_profile(str(chain.user))
    assert profile.claims["h1_e0_mrr_lt_fusion"].full.declared_in == EMBEDDED
    assert profile.claims["h2_ce_strict_gt_fusion"].full.declared_in == chain.study  # the user wrote only a reason
    assert profile.claims["h2_mine_mrr_gt_fusion"].full.declared_in == chain.user
    pins = {(p.scope, p.split, p.ranker, p.measure): p for p in profile.pins}
    assert pins["full", "test", "fusion", "strict"].declared_in == chain.study  # the study replaced the whole pin
    assert ("full", "test", "fusion", "mrr") not in pins
    assert pins["full", "test", "e0", "strict"].declared_in == EMBEDDED
    assert pins["full", "confirmation", "fusion", "strict"].declared_in == EMBEDDED
    assert (profile.gates["coverage_pct_min"].declared_in, profile.gates["coverage_pct_min"].limit) == (chain.study, 95)
    assert (profile.gates["fallback_pct_max"].declared_in, profile.gates["fallback_pct_max"].limit) == (chain.user, 5)
    assert profile.ranker_gates["ce"]["fallback_pct_max"].declared_in == chain.study
    assert {k: (g.limit, g.declared_in) for k, g in profile.ranker_gates["mine"].items()} == {
        "strict_pct_min": (40.0, chain.user), "mrr_min": (0.3, chain.user)}


def test_only_the_run_s_own_file_declares_unless_it_inherits_checks(chain) -> None:
    profile, strict = load_profile(str(chain.user)), load_profile(str(chain.strict))
    assert profile.declares(chain.user) and not profile.declares(chain.study) and not profile.declares(EMBEDDED)
    assert not profile.inherit_checks and not profile.enforces(chain.study) and profile.enforces(chain.user)
    assert strict.inherit_checks and strict.enforces(EMBEDDED) and strict.enforces(chain.study)
    embedded = load_profile("embedded")
    assert all(embedded.enforces(p.declared_in) for p in embedded.pins)  # the study's own runs fail on its pins


def test_a_ranker_s_gates_override_the_profile_wide_ones(chain) -> None:
    profile = load_profile(str(chain.user))
    assert profile.gate("fallback_pct_max", "ce").limit == 2.0  # its own
    assert profile.gate("fallback_pct_max", "mine").limit == 5.0  # the profile-wide one
    assert [(g.key, g.limit) for g in profile.gates_for(profile.rankers["mine"])] == [
        ("fallback_pct_max", 5.0), ("strict_pct_min", 40.0), ("mrr_min", 0.3)]
    assert profile.gates_for(profile.rankers["e0"]) == []  # a full-pool ranker does not fall back
    assert [d.name for d in profile.gated()] == [d.name for d in profile.window_rankers()]


@pytest.mark.parametrize("where, old, new, message", [
    ("user", "[gates]\n", "[gates]\nstrict_pct_min = 40\n",
     r"\[gates\]: 'strict_pct_min' must be one of .*quality gates are per ranker"),
    ("user", "[gates.mine]\n", "[gates.mine]\nmrr_max = 0.3\n",
     r"\[gates.mine\]: 'mrr_max' must be one of \['fallback_pct_max', 'strict_pct_min', 'mrr_min'\]"),
    ("user", "mrr_min = 0.3", 'mrr_min = "high"', r"\[gates.mine\]: 'mrr_min' must be one of"),
    ("study", "[gates.ce]\n", "[gates.ce]\ncolour = 1\n", r"\[gates.ce\]: 'colour' must be one of"),
    ("study", "[gates.ce]\n", "[gates.nobody]\nmrr_min = 0.3\n[gates.ce]\n",
     r"\[gates.nobody\]: 'mrr_min': 'nobody' is not a declared ranker"),
    ("study", "[gates.ce]\n", "[gates.e0]\nfallback_pct_max = 1\n[gates.ce]\n",
     r"\[gates.e0\]: 'fallback_pct_max': only a window ranker falls back"),
    ("study", "[gates.ce]\n", "[gates.grader_pairs]\nmrr_min = 0.1\n[gates.ce]\n",
     r"\[gates.grader_pairs\]: 'mrr_min': 'grader_pairs' scores designated pairs only"),
    ("study", "[profile]\n", "[profile]\ninherit_checks = 1\n", r"\[profile\]: inherit_checks must be true or false"),
])
def test_a_bad_gate_is_refused_at_load_naming_its_file_table_and_key(chain, where: str, old: str, new: str,
                                                                      message: str) -> None:
    path = chain.user if where == "user" else chain.study
    body = path.read_text(encoding="utf-8")
    assert old in body
    path.write_text(body.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(ProfileError, match=message) as info:
        load_profile(str(chain.user))
    assert str(info.value).startswith(str(path)), info.value  # the file that wrote it, not the one run


class Report:
    def __init__(self) -> None:
        self.rows: list[dict] = []

    def add(self, table: str, split: str, row: dict, order=None) -> None:
        self.rows.append(row)


def verdict(profile, name: str, p_greater: float, p_less: float, interval: tuple[float, float] = (-0.5, -0.3)):
    """One claim decided alone from hand-set one-sided p-values (effect above / below 0): p ≤ 0.025 on a side
    decides it (Holm over its 2 sides)."""
    d = definitions(profile)[name]
    return decide_family([ClaimTest(d, -0.4, *interval, 0.1, p_greater, p_less, 200, 100, "MRR")])[0]


def test_an_inherited_expectation_that_moved_is_reported_not_failed(chain) -> None:
    profile, report = load_profile(str(chain.user)), Report()
    with pytest.warns(checks.InheritedCheckMissed, match=r"now FAILS .* but specs/profiles/embedded.toml records "
                                                         r"'holds'.*inherited from specs/profiles/embedded.toml"):
        check_claim(profile, report, "test", verdict(profile, "h1_e0_mrr_lt_fusion", 0.0001, 1.0), subset=False)
    row = report.rows[-1]
    assert (row["status"], row["expected"], row["declaration"], row["declared_in"], row["check"]) == (
        "fails", "holds", "inherited", "specs/profiles/embedded.toml", "missed")
    strict = load_profile(str(chain.strict))
    with pytest.raises(pytest.fail.Exception, match="records 'holds'.*review specs/profiles/embedded.toml"):
        check_claim(strict, report, "test", verdict(strict, "h1_e0_mrr_lt_fusion", 0.0001, 1.0), subset=False)
    with pytest.warns(checks.InconclusiveClaim):  # inherited and undecided: never fails, even as CI's gate
        check_claim(profile, report, "test", verdict(profile, "h1_e0_mrr_lt_fusion", 0.5, 0.5), subset=False,
                    gate=True)
    assert report.rows[-1]["check"] == "undecided"


def test_a_declared_expect_is_checked_on_a_subset_run(chain) -> None:
    """Decided against on the subset: fails, naming the user's file; undecided there: reported, and failed only by
    the subset gate (its interval wholly beyond the 0.10 MRR margin against the expectation, --gate-expectations)."""
    profile, report = load_profile(str(chain.user)), Report()
    with pytest.raises(pytest.fail.Exception, match=rf"\[mine subset / test\] h2_mine_mrr_gt_fusion now FAILS .* but "
                                                    rf"{chain.user} records 'holds'"):
        check_claim(profile, report, "test", verdict(profile, "h2_mine_mrr_gt_fusion", 1.0, 0.0001), subset=True)
    assert (report.rows[-1]["declaration"], report.rows[-1]["check"]) == ("declared", "missed")
    with pytest.warns(checks.NotDecidableOnSubset, match="expects 'holds' \\(reviewed on the full run\\), not decidable"):
        check_claim(profile, report, "test", verdict(profile, "h2_mine_mrr_gt_fusion", 0.5, 0.5), subset=True)
    assert report.rows[-1]["check"] == "not decidable on this subset"
    with pytest.warns(checks.NotDecidableOnSubset):  # within the margin: the gate lets it pass
        check_claim(profile, report, "test", verdict(profile, "h2_mine_mrr_gt_fusion", 0.5, 0.5, (-0.5, -0.05)),
                    subset=True, gate=True)
    assert report.rows[-1]["check"] == "not decidable on this subset"
    with pytest.raises(pytest.fail.Exception, match=rf"not decidable on this subset, but its interval lies wholly "
                                                    rf"beyond the 0.1 MRR non-inferiority margin .*review {chain.user}"):
        check_claim(profile, report, "test", verdict(profile, "h2_mine_mrr_gt_fusion", 0.5, 0.5), subset=True,
                    gate=True)
    assert (report.rows[-1]["status"], report.rows[-1]["check"]) == ("inconclusive", "contradicted on this subset")
    check_claim(profile, report, "test", verdict(profile, "h2_mine_mrr_gt_fusion", 0.0001, 1.0), subset=True)
    assert report.rows[-1]["check"] == "met"


def test_a_subset_expectation_replaces_expect_on_subsets_and_gates_when_undecided(tmp_path: Path) -> None:
    path = write(tmp_path, "p.toml", '[profile]\nname = "x"\nextends = "embedded"\n'
                                     '[claims.h1_e0_mrr_lt_fusion]\nsubset_expect = "fails"\n'
                                     'subset_reason = "24 pairs: -0.3 [-0.4, -0.2]"\n')
    profile, report = load_profile(str(path)), Report()
    with pytest.raises(pytest.xfail.Exception, match="fails, as recorded"):
        check_claim(profile, report, "test", verdict(profile, "h1_e0_mrr_lt_fusion", 0.0001, 1.0), subset=True)
    with pytest.raises(pytest.fail.Exception, match="inconclusive.*--gate-expectations"):
        check_claim(profile, report, "test", verdict(profile, "h1_e0_mrr_lt_fusion", 0.5, 0.5), subset=True, gate=True)
    assert report.rows[-1]["check"] == "undecided" and report.rows[-1]["declared_in"] == str(path)
    check_claim(profile, report, "test", verdict(profile, "h1_e0_mrr_lt_fusion", 1.0, 0.0001), subset=False)
    assert report.rows[-1]["declared_in"] == "specs/profiles/embedded.toml"  # a full run checks embedded's expect


def test_gates_record_every_row_and_fail_only_on_what_the_run_declares(chain) -> None:
    profile, report = load_profile(str(chain.user)), Report()
    gates = profile.gates_for(profile.rankers["mine"])
    with pytest.raises(pytest.fail.Exception) as info:
        check_gates(profile, report, "test", list(zip(gates, (6.0, 41.0, 0.18))), subject="mine")
    assert str(info.value) == (f"[mine / test] gate fallback_pct_max (mine): measured 6, limit 5 ([gates] "
                               f"fallback_pct_max in {chain.user}); [mine / test] gate mrr_min (mine): measured 0.18, "
                               f"limit 0.3 ([gates.mine] mrr_min in {chain.user})")
    assert [(r["claim"], r["status"], r["check"]) for r in report.rows] == [
        ("gate:fallback_pct_max:mine", "fails", "missed"), ("gate:strict_pct_min:mine", "holds", "met"),
        ("gate:mrr_min:mine", "fails", "missed")]
    with pytest.warns(checks.InheritedCheckMissed, match=r"gate fallback_pct_max \(ce\): measured 3, limit 2 "
                                                         r"\(\[gates.ce\] fallback_pct_max in .*study.toml\)"):
        check_gates(profile, report, "test", [(profile.gate("fallback_pct_max", "ce"), 3.0)], subject="ce")
    embedded = load_profile("embedded")  # the study's own run: its global fallback gate fails it
    with pytest.raises(pytest.fail.Exception, match=r"\(\[gates\] fallback_pct_max in specs/profiles/embedded.toml\)"):
        check_gates(embedded, report, "test", [(embedded.gate("fallback_pct_max", "ce"), 0.5)], subject="ce")


def test_report_lines_say_what_moved_and_what_a_subset_cannot_decide() -> None:
    rows = pd.DataFrame([
        {"claim": "pin:fusion.strict", "family": "pin", "status": "changed", "expected": "27 ± 0",
         "measured": "changed: then 27, now 25", "ranker": "fusion", "declaration": "inherited",
         "declared_in": "study.toml", "check": "missed"},
        {"claim": "h1_e0_mrr_lt_fusion", "family": "H1", "status": "fails", "expected": "holds", "measured": "-0.1",
         "ranker": "e0", "versus": "fusion", "declaration": "inherited", "declared_in": "e.toml", "check": "missed"},
        {"claim": "gate:mrr_min:mine", "family": "gate", "status": "fails", "expected": "holds",
         "measured": "0.18 (limit 0.3)", "ranker": "mine", "declaration": "declared", "declared_in": "mine.toml",
         "check": "missed"},
        {"claim": "h2_mine_mrr_gt_fusion", "family": "H2:mine", "status": "inconclusive", "expected": "holds",
         "measured": "+0.01", "ranker": "mine", "versus": "fusion", "declaration": "declared",
         "declared_in": "mine.toml", "check": "not decidable on this subset"},
        {"claim": "h2_mine_strict_gt_fusion", "family": "H2:mine", "status": "inconclusive", "expected": "holds",
         "measured": "-40.00", "ranker": "mine", "versus": "fusion", "declaration": "declared",
         "declared_in": "mine.toml", "check": "contradicted on this subset"},
        {"claim": "h2_ce_mrr_gt_fusion", "family": "H2", "status": "inconclusive", "expected": "fails",
         "measured": "-0.2", "ranker": "ce", "versus": "fusion", "declaration": "inherited", "declared_in": "e.toml",
         "check": "undecided"}])
    assert inherited_misses(rows) == [
        "the study's ranker `fusion` moved (`pin:fusion.strict` pinned at 27 ± 0 in `study.toml`; changed: then 27, "
        "now 25): comparisons against `fusion` are against the moved ranker",
        "the study's claim `h1_e0_mrr_lt_fusion` now **fails** where `e.toml` records **holds**: `e0` or `fusion` "
        "moved, so comparisons against them are against the moved ranker (-0.1)"]  # a declared gate fails the run
    assert undecidable_on_subset(rows) == [
        "`h2_mine_strict_gt_fusion`: `mine.toml` expects **holds** (reviewed on the full run); not decidable on this "
        "subset, and its interval lies wholly beyond the subset gate's margin against it (**fails the gate**): -40.00",
        "`h2_mine_mrr_gt_fusion`: `mine.toml` expects **holds** (reviewed on the full run); not decidable on this "
        "subset: +0.01"]
    assert lost_expectations(rows) == ["`h2_ce_mrr_gt_fusion` was reviewed as **fails** (`e.toml`) but is "
                                       "inconclusive now: -0.2"]
