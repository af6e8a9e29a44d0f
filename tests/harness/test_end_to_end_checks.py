"""A user's run answers for the user's rankers, end to end (docs/statistics.md#inherited-checks, #expectations, #gates).

A lab's copy of the study profile (``lab.toml``, extending the embedded one) pins fusion wrongly; a user's profile
extends it and adds a deliberately random reranker (``tests.support.sequential_scorers:coin``, a seeded hash of
the texts) declared with ``expect = "holds"`` on its MRR and strict claims and a quality gate ``mrr_min = 0.9``.
On a seeded 100-pair subset (the CI subset's 24 pairs decide no claim: 12 groups, docs/statistics.md#weak-null;
100 pairs decide the random ranker's MRR claim, measured 2026-12-02: Holm 0.0004 on both splits) the run:

- reports the lab's broken pin (claims.csv: inherited, changed, naming lab.toml; the top of report.md and the
  terminal: the study's ranker fusion moved) but its pin tests pass;
- fails the random ranker's MRR claim on the subset, naming the user's file, and reports its undecided strict
  claim as not decidable on this subset;
- fails the quality gate, naming the user's file and table.
"""
from __future__ import annotations

import re

import pandas as pd
import pytest

from fixtures.settings import PROJECT_ROOT
from tests.harness.test_end_to_end import SPLITS, run_specs

#: Overrides the CI subset's --subset-pairs that ``run_specs`` passes first (the last value of an option wins).
PAIRS = ("--subset-pairs", "100")
SCOPE = "subset-100-seed0-sample4"
LAB = f"""
[profile]
name = "lab"
extends = "embedded"

[pins.{SCOPE}.test]
fusion = {{ n = 1, strict = 1 }}
"""
#: A deliberately random window reranker (a seeded hash of the texts), declared by both users' profiles below.
RANDOM = """
[rankers.random_window]
kind = "python"
factory = "tests.support.sequential_scorers:coin"
options = { salt = "gates" }
label = "a deliberately random window reranker"
order = 46
"""
MINE = f"""
[profile]
name = "mine"
extends = "lab.toml"
pythonpath = ["{PROJECT_ROOT}"]
{RANDOM}
[claims.h2_random_window_mrr_gt_fusion]
expect = "holds"
[claims.h2_random_window_strict_gt_fusion]
expect = "holds"

[gates.random_window]
mrr_min = 0.9
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    root = tmp_path_factory.mktemp("e2e-checks")
    lab, mine = root / "lab.toml", root / "mine.toml"
    lab.write_text(LAB, encoding="utf-8")
    mine.write_text(MINE, encoding="utf-8")
    done = run_specs(mine, root / "results", *PAIRS, "-k", "random_window or (pinned_value and fusion)", "-rA")
    return {"done": done, "out": done.stdout, "lab": lab.resolve(), "mine": mine.resolve(),
            "results": root / "results" / "partial"}


def outcomes(out: str) -> dict[str, str]:
    """The short test summary (``-rA``): test id -> PASSED, FAILED or ERROR."""
    return {test: kind for kind, test in re.findall(r"^(PASSED|FAILED|ERROR) (\S+)", out, re.M)}


def test_only_what_the_user_declares_fails(run) -> None:
    out, seen = run["out"], outcomes(run["out"])
    assert run["done"].returncode == 1, out[-4000:]
    failed = sorted(t for t, kind in seen.items() if kind != "PASSED")
    assert failed == sorted([*(f"specs/test_h2_window_reranking.py::test_h2[{s}-h2_random_window_mrr_gt_fusion]"
                               for s in SPLITS),
                             *(f"specs/test_table2.py::test_ranker_gates[{s}-random_window]" for s in SPLITS)]), out[-4000:]
    assert seen["specs/test_pins.py::test_pinned_value[test-fusion-n]"] == "PASSED"
    assert seen["specs/test_pins.py::test_pinned_value[test-fusion-strict]"] == "PASSED"


def test_failures_name_the_user_s_file(run) -> None:
    out, mine = run["out"], re.escape(str(run["mine"]))
    for split in SPLITS:
        assert re.search(rf"\[mine subset / {split}\] h2_random_window_mrr_gt_fusion now FAILS \(.*\) but {mine} "
                         rf"records 'holds'; review {mine}", out), out[-4000:]
        assert re.search(rf"\[mine / {split}\] gate mrr_min \(random_window\): measured 0\.\d+, limit 0\.9 "
                         rf"\(\[gates\.random_window\] mrr_min in {mine}\)", out), out[-4000:]


def test_the_inherited_broken_pin_is_reported_with_its_consequence(run) -> None:
    claims = pd.read_csv(run["results"] / "test" / "claims.csv").set_index("claim")
    for measure in ("n", "strict"):
        row = claims.loc[f"pin:fusion.{measure}"]
        assert (row["status"], row["declaration"], row["declared_in"], row["check"]) == (
            "changed", "inherited", str(run["lab"]), "missed")
    mine = claims.loc["h2_random_window_mrr_gt_fusion"]
    assert (mine["status"], mine["expected"], mine["declaration"], mine["declared_in"], mine["check"]) == (
        "fails", "holds", "declared", str(run["mine"]), "missed")
    report = (run["results"] / "test" / "report.md").read_text(encoding="utf-8")
    top = report[:report.index("## Each verdict")]  # beside the verdict table, before the details
    assert "## Inherited checks this run missed" in top
    assert "the study's ranker `fusion` moved (`pin:fusion.n` pinned at 1 ± 0 in " in top
    assert "comparisons against `fusion` are against the moved ranker" in top
    assert "INHERITED CHECKS MISSED" in run["out"]
    assert re.search(r"\[test\] the study's ranker `fusion` moved .*comparisons against `fusion` are against the "
                     r"moved ranker", run["out"])


def test_an_expectation_the_subset_cannot_decide_is_said_loudly(run) -> None:
    """The random ranker's strict claim is inconclusive on Test's 100-pair subset (measured: p 0.82 / 1)."""
    claims = pd.read_csv(run["results"] / "test" / "claims.csv").set_index("claim")
    row = claims.loc["h2_random_window_strict_gt_fusion"]
    assert (row["status"], row["check"]) == ("inconclusive", "not decidable on this subset")
    report = (run["results"] / "test" / "report.md").read_text(encoding="utf-8")
    top = report[:report.index("## Each verdict")]  # beside the verdict table, before the details
    assert "## Expectations this subset cannot decide" in top
    assert f"`h2_random_window_strict_gt_fusion`: `{run['mine']}` expects **holds** (reviewed on the full run)" in top
    assert "EXPECTATIONS NOT DECIDABLE ON THIS SUBSET" in run["out"]
    assert "[test] `h2_random_window_strict_gt_fusion`" in run["out"]


GATED = f"""
[profile]
name = "gated"
extends = "embedded"
pythonpath = ["{PROJECT_ROOT}"]
{RANDOM}
[rankers.flat_window]
kind = "python"
factory = "tests.support.sequential_scorers:flat"
label = "fusion's copy: every passage scored alike, fusion's order kept"
order = 47

[claims.h2_random_window_mrr_gt_fusion]
expect = "holds"
[claims.h2_random_window_strict_gt_fusion]
expect = "holds"
[claims.h2_flat_window_mrr_gt_fusion]
expect = "holds"
"""


@pytest.fixture(scope="module")
def gated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """The CI command's subset (24 pairs: 12-13 groups, no claim decidable) under --gate-expectations."""
    root = tmp_path_factory.mktemp("e2e-gate")
    profile = root / "gated.toml"
    profile.write_text(GATED, encoding="utf-8")
    done = run_specs(profile, root / "results", "--gate-expectations", "-k", "random_window or flat_window", "-rA")
    return {"done": done, "out": done.stdout, "err": done.stderr, "profile": profile.resolve(),
            "results": root / "results" / "partial"}


def test_the_subset_gate_fails_a_random_reranker_and_passes_fusion_s_copy(gated) -> None:
    """On the CI subset the random reranker's MRR claim is not decidable, yet its interval lies wholly beyond the
    0.10 non-inferiority margin below fusion: the subset gate fails it (docs/statistics.md#subset-gate). Fusion's
    copy (Δ = 0) passes with its expectation reported as not decidable."""
    out, seen = gated["out"], outcomes(gated["out"])
    assert gated["done"].returncode == 1, out[-4000:]
    failed = sorted(t for t, kind in seen.items() if kind != "PASSED")
    assert failed == [f"specs/test_h2_window_reranking.py::test_h2[{s}-h2_random_window_mrr_gt_fusion]"
                      for s in sorted(SPLITS)], out[-4000:]
    assert seen["specs/test_h2_window_reranking.py::test_h2[test-h2_flat_window_mrr_gt_fusion]"] == "PASSED"
    assert "non-inferiority margin against it (the subset gate" in out
    claims = pd.read_csv(gated["results"] / "test" / "claims.csv").set_index("claim")
    assert (claims.loc["h2_random_window_mrr_gt_fusion", ["status", "check"]].tolist()
            == ["inconclusive", "contradicted on this subset"])
    assert (claims.loc["h2_flat_window_mrr_gt_fusion", ["status", "check", "effect"]].tolist()
            == ["inconclusive", "not decidable on this subset", 0.0])


def test_a_strict_expectation_the_subset_cannot_gate_is_said_once_before_work(gated) -> None:
    """The random reranker's strict "holds": no interval on 12 groups can gate it and no full run is saved. The run
    says so once, before any work, with what would gate it, and reports the row as not gateable (a warning): its
    spec passes instead of being refused inside the results (docs/statistics.md#subset-gate)."""
    err, seen = gated["err"], outcomes(gated["out"])
    assert err.count("--gate-expectations: this 24-pair subset cannot decide these expectations") == 1, err[-3000:]
    assert not err.split("--gate-expectations: this 24-pair subset")[0].strip(), err[:3000]  # before any work
    assert f"[test] h2_random_window_strict_gt_fusion: {gated['profile']} expects 'holds'; what would gate it: a " \
           "saved full run, or a subset of about" in err
    for split in sorted(SPLITS):
        assert seen[f"specs/test_h2_window_reranking.py::test_h2[{split}-h2_random_window_strict_gt_fusion]"] == \
            "PASSED"
    claims = pd.read_csv(gated["results"] / "test" / "claims.csv").set_index("claim")
    assert (claims.loc["h2_random_window_strict_gt_fusion", ["status", "check"]].tolist()
            == ["inconclusive", "not gateable on this subset"])
