"""The subset gate holds the full run's verdict (docs/statistics.md#subset-gate): a CI subset run under
``--gate-expectations`` reads the claim's verdict from the newest saved full run of the profile
(``results/.history``) and fails an expectation that verdict contradicts, however the subset's interval looks; the
last test runs the README's CI command end to end."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from fixtures.settings import PROJECT_ROOT, Settings
from harness import checks
from harness.claims import definitions
from harness.profile import load_profile
from reports.claim_measures import ClaimTest
from reports.history import HISTORY, HistoryError
from reports.hypotheses import decide_family
from reports.report_md import undecidable_on_subset
from tests.support.saved_runs import seal_entry

USER = '''[profile]
name = "mine"
extends = "embedded"
[rankers.mine]
kind = "python"
factory = "tests.support.sequential_scorers:coin"
order = 45
[claims.h2_mine_mrr_gt_fusion]
expect = "holds"
[claims.h2_mine_strict_gt_fusion]
expect = "holds"
'''


def save_run(results: Path, run_id: str, scope: str, rows: list[dict], profile: str = "mine",
             partial: tuple[str, ...] = ()) -> Path:
    """A saved run of the history as ``reports.history.save_to_history`` lays it out: the split's manifest and
    claims.csv, and entry.json with their digests."""
    folder = results / HISTORY / run_id / "test"
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"scope": scope, "profile": {"name": profile},
                                                      "partial": list(partial)}), "utf-8")
    pd.DataFrame(rows).to_csv(folder / "claims.csv", index=False)
    seal_entry(results, run_id)
    return folder


def undecided(profile, name: str, interval: tuple[float, float]):
    """The claim as a 12-group subset leaves it: inconclusive, its interval as given."""
    unit = "pts" if "strict" in name else "MRR"
    test = ClaimTest(definitions(profile)[name], sum(interval) / 2, *interval, 0.1, 0.4, 0.6, 48, 12, unit)
    return decide_family([test])[0]


@pytest.fixture
def mine(tmp_path: Path):
    path = tmp_path / "mine.toml"
    path.write_text(USER, encoding="utf-8")
    return load_profile(str(path))


def test_an_expectation_the_full_run_contradicts_fails_the_ci_gate(mine, tmp_path: Path) -> None:
    """The README's literal ``expect = "holds"`` for a ranker whose full run recorded *fails*: the CI subset cannot
    decide it and its interval lies within the margin, yet the gate fails it, naming the full run's verdict."""
    results = tmp_path / "results"
    save_run(results, "20261205T100000.000000Z-abc-mine-full-1", "full",
             [{"claim": "h2_mine_mrr_gt_fusion", "status": "fails", "effect": -0.38, "p_adjusted": 0.0004}])
    save_run(results, "20261205T110000.000000Z-abc-mine-subset-24-seed0-sample4-2", "subset-24-seed0-sample4",
             [{"claim": "h2_mine_mrr_gt_fusion", "status": "inconclusive", "effect": -0.02, "p_adjusted": 1.0}])
    recorded = checks.recorded_verdict(results, "mine", "test", "h2_mine_mrr_gt_fusion")
    assert recorded is not None and (recorded.status, recorded.effect) == ("fails", -0.38)  # the full run's, not the newer subset's
    result = undecided(mine, "h2_mine_mrr_gt_fusion", (-0.06, 0.02))
    assert not checks.contradicts(result, "holds")  # the interval alone would let it pass
    row, found = checks.claim_check(mine, "test", result, subset=True, gate=True, recorded=recorded)
    assert row["check"] == "contradicted by the full run" and [c.action for c in found] == ["fail"]
    assert "expects 'holds', but the full run 20261205T100000.000000Z-abc-mine-full-1 recorded 'fails'" in \
        found[0].message
    listed = undecidable_on_subset(pd.DataFrame([row]))  # report.md's and the terminal's block
    assert len(listed) == 1 and "the profile's saved full run recorded another verdict (**fails the gate**)" in \
        listed[0]
    row, found = checks.claim_check(mine, "test", result, subset=True, gate=False, recorded=recorded)
    assert row["check"] == "not decidable on this subset" and [c.action for c in found] == ["warn"]  # no gate


def test_the_full_run_s_verdict_backs_an_expectation_it_agrees_with(mine, tmp_path: Path) -> None:
    results = tmp_path / "results"
    save_run(results, "20261205T100000.000000Z-abc-mine-full-1", "full",
             [{"claim": "h2_mine_strict_gt_fusion", "status": "holds", "effect": 23.1, "p_adjusted": 0.0001}])
    save_run(results, "20261205T120000.000000Z-abc-other-full-3", "full",
             [{"claim": "h2_mine_strict_gt_fusion", "status": "fails", "effect": -9.0, "p_adjusted": 0.001}],
             profile="other")  # another profile's run is not this one's verdict
    save_run(results, "20261205T130000.000000Z-abc-mine-full-partial-4", "full",
             [{"claim": "h2_mine_strict_gt_fusion", "status": "inconclusive", "effect": 2.0, "p_adjusted": 1.0}],
             partial=("-m not llm",))  # a partial run's inconclusive says nothing: never more decisive than the whole
    recorded = checks.recorded_verdict(results, "mine", "test", "h2_mine_strict_gt_fusion")
    assert recorded.status == "holds"
    result = undecided(mine, "h2_mine_strict_gt_fusion", (-12.0, 30.0))
    row, found = checks.claim_check(mine, "test", result, subset=True, gate=True, recorded=recorded)
    assert row["check"] == "not decidable on this subset" and [c.action for c in found] == ["warn"]
    assert "recorded 'holds' (effect +23.1, Holm p 0.0001), which the subset gate holds" in found[0].message


def test_without_a_saved_full_run_a_user_s_strict_expectation_is_said_before_work_not_refused(mine, tmp_path: Path
                                                                                             ) -> None:
    """The interval cannot gate strict preference (a random reranker's is fusion's within about 2 points). Without a
    saved full run the gated subset run says so once, before any work, naming the expectation and what would gate
    it (a saved full run, or about how many pairs); the row reads not gateable, a warning, never a refusal that
    fails a true "holds". MRR is gated by its interval; the shipped profile's strict expectations are reviewed on the
    project's full runs and only warn; a saved full run is held instead."""
    nothing = tmp_path / "nothing"
    gated = Settings(splits=("test",), results_dir=nothing, subset_pairs=24, gate_expectations=True)
    notice = checks.subset_notice(gated, mine)
    assert notice[0].startswith("--gate-expectations: this 24-pair subset cannot decide these expectations")
    lines = [line for line in notice if line.startswith("  [")]
    assert len(lines) == 1 and lines[0].startswith("  [test] h2_mine_strict_gt_fusion: ")
    pairs = int(re.search(r"a saved full run, or a subset of about (\d+) pairs \(--subset-pairs \1\)", lines[0])[1])
    assert 100 < pairs < 1383  # a 10-point change needs hundreds of pairs, fewer than Test holds
    assert f"README command 1 with --results-dir {nothing}" in notice[-1]
    assert checks.subset_notice(replace(gated, gate_expectations=False), mine) == []
    assert checks.subset_notice(replace(gated, subset_pairs=None), mine) == []
    result = undecided(mine, "h2_mine_strict_gt_fusion", (-12.0, 10.0))
    row, found = checks.claim_check(mine, "test", result, subset=True, gate=True)
    assert row["check"] == "not gateable on this subset" and [c.action for c in found] == ["warn"]
    assert "not gated" in found[0].message and "said before the run's work" in found[0].message
    row, _ = checks.claim_check(mine, "test", undecided(mine, "h2_mine_mrr_gt_fusion", (-0.3, 0.1)), subset=True,
                                gate=True)
    assert row["check"] == "not decidable on this subset"
    shipped = "h2_grader_pairs_expected_strict_gt_fusion"
    embedded = load_profile("embedded")
    row, found = checks.claim_check(embedded, "test", undecided(embedded, shipped, (-20.0, 40.0)), subset=True,
                                    gate=True)
    assert row["check"] == "not decidable on this subset" and [c.action for c in found] == ["warn"]
    assert checks.subset_notice(replace(gated, results_dir=nothing), embedded) == []
    save_run(tmp_path / "held", "20261205T100000.000000Z-abc-mine-full-1", "full",
             [{"claim": "h2_mine_strict_gt_fusion", "status": "holds", "effect": 22.9, "p_adjusted": 0.0004}])
    assert checks.subset_notice(replace(gated, results_dir=tmp_path / "held"), mine) == []  # the gate holds it


def test_an_edited_saved_run_is_refused_and_only_gated_subset_runs_look(mine, tmp_path: Path) -> None:
    results = tmp_path / "results"
    folder = save_run(results, "20261205T100000.000000Z-abc-mine-full-1", "full",
                      [{"claim": "h2_mine_mrr_gt_fusion", "status": "fails", "effect": -0.38, "p_adjusted": 0.0004}])
    (folder / "claims.csv").write_text("claim,status\nh2_mine_mrr_gt_fusion,holds\n", encoding="utf-8")
    save_run(results, "20261205T090000.000000Z-abc-mine-full-0", "full",
             [{"claim": "h2_mine_mrr_gt_fusion", "status": "holds", "effect": 0.2, "p_adjusted": 0.001}])
    entry = results / HISTORY / "20261205T090000.000000Z-abc-mine-full-0" / "entry.json"
    index = json.loads(entry.read_text(encoding="utf-8"))
    entry.write_text(json.dumps({**index, "hmac": "0" * 64}), encoding="utf-8")  # another user's: skipped
    with pytest.raises(HistoryError, match="claims.csv was changed after the run saved it"):
        checks.recorded_verdict(results, "mine", "test", "h2_mine_mrr_gt_fusion")
    looked: list[tuple] = []

    def session(subset: bool, gate: bool) -> SimpleNamespace:
        return SimpleNamespace(is_subset=subset, settings=SimpleNamespace(gate_expectations=gate, results_dir=results),
                               profile=mine, shared=lambda key, build: looked.append(key) or build())

    assert checks.full_run_verdict(session(False, True), "test", "h2_mine_mrr_gt_fusion") is None
    assert checks.full_run_verdict(session(True, False), "test", "h2_mine_mrr_gt_fusion") is None
    assert looked == []


COPY = f'''[profile]
name = "copycat"
extends = "embedded"
pythonpath = ["{PROJECT_ROOT}"]
[rankers.flat_window]
kind = "python"
factory = "tests.support.sequential_scorers:flat"
label = "fusion's copy: every passage scored alike, fusion's order kept"
order = 47
[claims.h2_flat_window_mrr_gt_fusion]
expect = "holds"
'''


def test_the_ci_subset_fails_an_expectation_its_saved_full_run_contradicts(tmp_path: Path) -> None:
    """End to end, the README's CI command on Test: fusion's copy recorded as ``holds`` on "MRR above fusion" passes
    the subset gate alone (Δ = 0, within the margin), and fails it once the results folder's history holds a full
    run of the profile that recorded *fails*, the message naming that run."""
    profile = tmp_path / "copycat.toml"
    profile.write_text(COPY, encoding="utf-8")

    def ci(results: Path) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "pytest", "specs", "-p", "no:cacheprovider", "--benchmark-skip", "-m", "not llm",
             "--profile", str(profile), "--results-dir", str(results), "--splits", "test", "--subset-pairs", "24",
             "--grader-sample", "4", "--gate-expectations", "-q", "-k", "h2 and flat_window"], cwd=PROJECT_ROOT,
            capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
            timeout=1800)

    alone = ci(tmp_path / "fresh")
    assert alone.returncode == 0, alone.stdout[-3000:]
    run = "20261205T100000.000000Z-abc-copycat-full-1"
    save_run(tmp_path / "held", run, "full", [{"claim": "h2_flat_window_mrr_gt_fusion", "status": "fails",
                                               "effect": -0.02, "p_adjusted": 0.001}], profile="copycat")
    held = ci(tmp_path / "held")
    assert held.returncode == 1, held.stdout[-3000:]
    assert (f"h2_flat_window_mrr_gt_fusion: {profile} expects 'holds', but the full run {run} recorded 'fails'"
            in held.stdout), held.stdout[-3000:]
