"""The publishing faults on the real specs (CI subset, the shared cache): what a user's runs leave in results/.

A ``-k`` selection followed by a full run, and a SIGINT while publishing followed by a rerun,
each leave complete single-run results whose manifest digests match the files; a bad
declaration costs only its own rows (pairwise included); a run given ``--cache-dir`` writes
nothing to the default cache folder. The runs use the embedded profile's fusion, LambdaMART
and cross-encoder rankers (``PROFILE``): complete runs of every spec in about 20 s warm,
without the CPU grader's minutes.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from reports.render import md_escape

import fake_project as fake
from fixtures.settings import PROJECT_ROOT, default_cache_dir
from tests.support.hold import Hold

SUBSET = ("--subset-pairs", "24", "--subset-seed", "0", "--grader-sample", "4")  # the CI scope of the pins
PROFILE = """
[profile]
name = "faults-cpu"
description = "the embedded profile's fusion, LambdaMART and cross-encoder rankers, without the LLM grader"

[models]
dense = "builtin:all-MiniLM-L6-v2"
sparse = "builtin:splade-tiny"

[rankers.fusion]
kind = "fusion"
order = 10

[rankers.e0]
kind = "lambdamart"
background = 0
order = 20

[rankers.bg8]
kind = "lambdamart"
background = 8
order = 30

[rankers.ce]
kind = "cross_encoder"
model = "trained"
order = 40

[claims.h1_e0_mrr_lt_fusion]
family = "H1"
ranker = "e0"
versus = "fusion"
measure = "mrr"
direction = "<"

[gates]
coverage_pct_min = 90.0
fallback_pct_max = 0.0
"""


@pytest.fixture(scope="module")
def profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("profile") / "faults.toml"
    path.write_text(PROFILE, encoding="utf-8")
    return path


def command(results: Path, profile: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "specs", "-p", "no:cacheprovider", "--benchmark-skip", *SUBSET,
            "--profile", str(profile), "--results-dir", str(results), "-q", *extra]


def environment(**extra: str) -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **extra}


def specs(results: Path, profile: Path, *extra: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(command(results, profile, *extra), cwd=PROJECT_ROOT, capture_output=True, text=True,
                          env=environment(**env), timeout=3600)


def complete(results: Path) -> str:
    """The id of the one run every split under ``results`` comes from, after checking every file's digest."""
    fake.verify(results)
    runs = set(fake.published(results).values())
    assert len(runs) == 1, f"splits from different runs: {runs}"
    for split in fake.SPLITS:
        for name in ("table1.csv", "table2.csv", "claims.csv", "pairwise.csv", "qrels.txt", "directions.csv",
                     "pool.parquet", "runs/fusion.trec", "report.md"):
            assert (results / split / name).is_file(), f"{split}/{name} missing"
    return runs.pop()


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory, profile: Path) -> Path:
    """A complete run of every spec on the CI subset."""
    results = tmp_path_factory.mktemp("real") / "results"
    result = specs(results, profile)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    complete(results)
    return results


def test_a_selection_then_a_full_run_leave_complete_single_run_results(published: Path, profile: Path) -> None:
    """Failure 2: `-k "test_table2_row and fusion"` exited 0 and left results/test with three Table II rows."""
    before = complete(published)
    selection = specs(published, profile, "-k", "test_table2_row and fusion")
    assert selection.returncode == 0, selection.stdout[-3000:]
    assert complete(published) == before  # the complete results stand
    assert "PARTIAL RUN" in selection.stdout and f"{published / 'partial'}" in selection.stdout
    assert set(pd.read_csv(published / "partial" / "test" / "table2.csv")["ranker"]) == {"fusion"}
    full = specs(published, profile)
    assert full.returncode == 0, full.stdout[-3000:]
    assert complete(published) != before


def test_sigint_while_publishing_then_a_rerun_leave_complete_single_run_results(published: Path, profile: Path,
                                                                                tmp_path: Path) -> None:
    """Failure 4: SIGINT while publishing exited 130 with a traceback and mixed the splits of two runs."""
    before = complete(published)
    hold = Hold(tmp_path / "hold", "publish:test")  # held while staging the last split, its tables written
    proc = subprocess.Popen(command(published, profile, "-p", "tests.support.hold"), cwd=PROJECT_ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environment(**hold.env()))
    sent = hold.reached(proc)
    if sent:
        proc.send_signal(signal.SIGINT)  # deferred by the publisher to its next checkpoint
        hold.release()
    out, _ = proc.communicate(timeout=600)
    assert sent, out[-3000:]
    assert proc.returncode == 2 and "Traceback" not in out, out[-3000:]
    assert complete(published) == before
    rerun = specs(published, profile)
    assert rerun.returncode == 0, rerun.stdout[-3000:]
    assert complete(published) != before


def test_a_bad_declaration_costs_only_its_own_rows_pairwise_included(tmp_path: Path, profile: Path) -> None:
    """Failure 7: one malformed TREC run removed pairwise.csv for every ranker of its population. The run is
    published whole, under partial/ (a part failed, so it is not complete), with every other ranker's rows."""
    run = tmp_path / "malformed.trec"
    run.write_text("this is not a TREC run line\n", encoding="utf-8")
    bad = tmp_path / "bad.toml"
    bad.write_text(f'[profile]\nname = "bad"\nextends = "{profile}"\n\n[rankers.bad_run]\nkind = "trec_run"\n'
                   f'path = "{run}"\norder = 93\n', encoding="utf-8")
    results = tmp_path / "results"
    result = specs(results, bad)
    assert result.returncode == 1, result.stdout[-3000:]
    assert "PARTIAL RUN" in result.stdout and not (results / "test").exists()
    for split in fake.SPLITS:
        pairwise = pd.read_csv(results / "partial" / split / "pairwise.csv")
        assert {"fusion", "e0", "bg8", "ce"} <= set(pairwise["first"]) | set(pairwise["second"])
        assert "bad_run" not in set(pairwise["first"]) | set(pairwise["second"])
        # report.md names the declaration, escaped as Markdown text (it reads "[rankers.bad_run]" when rendered)
        assert md_escape("[rankers.bad_run]") in (results / "partial" / split / "report.md").read_text()
        manifest = json.loads((results / "partial" / split / "manifest.json").read_text())
        assert any("bad_run" in entry["test"] for entry in manifest["not_evaluated"])
        assert any("failed" in reason and "bad_run" in reason for reason in manifest["partial"])
    complete(results / "partial")


def test_a_run_given_a_cache_dir_writes_nothing_to_the_default_cache(tmp_path: Path, profile: Path) -> None:
    """Failure 11: model fingerprint stamps were written to the default cache folder, whatever --cache-dir said."""
    cache = default_cache_dir()  # the shared, warm cache, given explicitly
    home = tmp_path / "home"
    env = {k: v for k, v in environment(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache")).items()
           if k != "NEVIR_CACHE_DIR"}
    result = subprocess.run(command(tmp_path / "results", profile, "--cache-dir", str(cache), "-k",
                                    "test_run_manifest"), cwd=PROJECT_ROOT, capture_output=True, text=True, env=env, timeout=3600)
    assert result.returncode == 0, result.stdout[-3000:]
    leaked = home / ".cache" / "preference-position"
    assert not leaked.exists(), f"written outside --cache-dir: {sorted(str(p) for p in leaked.rglob('*'))[:10]}"


def test_the_grader_benchmark_given_a_cache_dir_writes_nothing_to_the_default_cache(tmp_path: Path) -> None:
    """Failure 11, its last leak: the grader benchmark joined its GGUF into the default cache folder, whatever
    --cache-dir said. Its fixtures are set up (the 1.5B GGUF located, verified and, where missing, joined) under a
    home folder of its own, with the shared cache given explicitly."""
    home = tmp_path / "home"
    env = {k: v for k, v in environment(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"),
                                        NEVIR_BENCH_GGUF="qwen2.5-coder-1.5b-instruct").items()
           if k != "NEVIR_CACHE_DIR"}
    result = subprocess.run([sys.executable, "-m", "pytest", "specs/bench_grader.py", "-p", "no:cacheprovider",
                             "--setup-only", "-rs", "-k", "prompt_layout", "--cache-dir", str(default_cache_dir()), "-q"],
                            cwd=PROJECT_ROOT, capture_output=True, text=True, env=env, timeout=1800)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "SETUP    M model" in result.stdout and "SKIPPED" not in result.stdout, result.stdout[-2000:]
    leaked = home / ".cache" / "preference-position"
    assert not leaked.exists(), f"written outside --cache-dir: {sorted(str(p) for p in leaked.rglob('*'))[:10]}"
