"""Every option and the profile are checked before any work: one message naming the option or file."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.settings import PROJECT_ROOT, default_cache_dir
from harness.options import path_option


def run_specs(*args: str, cache: Path) -> subprocess.CompletedProcess:
    """``pytest specs --collect-only`` with the given options: collection needs no pool, model or score."""
    env = {**os.environ, "NEVIR_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, "-m", "pytest", "specs", "--collect-only", "-q", "-p", "no:cacheprovider",
                           *args], cwd=PROJECT_ROOT, capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.parametrize("args, message", [
    (["--splits", ""], "--splits '' names no split"),
    (["--splits", "test,validation"], "--splits: unknown split\\(s\\) \\['validation'\\]"),
    (["--subset-pairs", "0"], "--subset-pairs must be >= 1"),
    (["--subset-pairs", "-1"], "--subset-pairs must be >= 1"),
    (["--grader-sample", "-5"], "--grader-sample must be >= 0"),
    (["--max-judge-minutes", "0"], "--max-judge-minutes must be > 0 minutes"),
    (["--data-dir", "/nonexistent/nevir"], "--data-dir /nonexistent/nevir is not a directory"),
    (["--profile", "nonexistent"], "--profile: profile 'nonexistent' not found"),
])
def test_bad_options_stop_before_any_work(tmp_path: Path, args: list[str], message: str) -> None:
    result = run_specs(*args, cache=tmp_path / "cache")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    assert re.search(message, result.stderr + result.stdout), result.stderr
    assert not (tmp_path / "cache" / "pools").exists()  # nothing was built


def test_a_profile_syntax_error_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "mine.toml"
    bad.write_text('[profile]\nname = "mine"\nextends = "embedded"\n[rankers.x\nkind = "fusion"\n', encoding="utf-8")
    result = run_specs("--profile", str(bad), cache=tmp_path / "cache")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR
    assert f"{bad}: not valid TOML" in result.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through read-only permissions")
def test_an_unwritable_results_dir_is_refused_up_front(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    results.chmod(0o500)
    try:
        result = run_specs("--results-dir", str(results), cache=tmp_path / "cache")
    finally:
        results.chmod(0o700)
    assert result.returncode == pytest.ExitCode.USAGE_ERROR
    assert f"--results-dir {results} is not writable" in result.stderr


def test_a_results_path_that_is_a_file_is_refused_up_front(tmp_path: Path) -> None:
    """Even as root (where permissions do not stop writes), a results path that cannot hold files is refused."""
    blocker = tmp_path / "results"
    blocker.write_text("a file, not a folder")
    result = run_specs("--results-dir", str(blocker), cache=tmp_path / "cache")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR
    assert f"--results-dir {blocker} is not writable" in result.stderr


def test_valid_options_collect_the_declared_rankers(tmp_path: Path) -> None:
    result = run_specs("--subset-pairs", "4", cache=tmp_path / "cache")
    assert result.returncode == 0, result.stderr
    for ranker in ("fusion", "e0", "bg8", "ce", "grader_pairs", "grader_pairs_e0"):
        assert f"test_table2_row[test-{ranker}]" in result.stdout
    assert "test_table2_row[test-grader]" not in result.stdout  # declared, not enabled in the embedded profile


def test_path_options_are_expanded_and_made_absolute_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert path_option("~/x") == tmp_path / "x" and path_option("rel") == tmp_path / "rel"


def test_a_results_dir_under_home_is_published_into_the_home_directory(tmp_path: Path) -> None:
    """``--results-dir=~/x`` (not expanded by a shell) publishes into $HOME/x, and every reader uses that path."""
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "NEVIR_CACHE_DIR": str(default_cache_dir()), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-m", "pytest", "specs", "-p", "no:cacheprovider", "--benchmark-skip",
                             "-m", "not llm", "--subset-pairs", "24", "--subset-seed", "0", "--splits", "test",
                             "-k", "table2_row and fusion and not fusion_sample", "--results-dir=~/x", "-q"],
                            cwd=PROJECT_ROOT, capture_output=True, text=True, env=env, timeout=1800)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    # A -k selection is a partial run: it is published whole under <results>/partial (docs/protocol.md#publishing).
    assert (home / "x" / "partial" / "test" / "table2.csv").is_file()
    assert f"results written to {home / 'x' / 'partial' / 'test'}" in result.stdout
    assert not (PROJECT_ROOT / "~").exists(), "a folder literally named ~ was created in the checkout"


def test_a_ranker_this_machine_cannot_run_is_skipped_with_its_kinds_reason(tmp_path: Path) -> None:
    """A declared requirement (here CUDA, from ``marks = ["gpu"]``) skips the ranker's rows with the reason."""
    import torch  # only to know whether this machine has the device the declaration asks for

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device: nothing to skip")
    mine = tmp_path / "mine.toml"
    mine.write_text('[profile]\nname = "mine"\nextends = "embedded"\n'
                    '[rankers.fusion_gpu]\nkind = "fusion"\nmarks = ["gpu"]\norder = 99\n', encoding="utf-8")
    result = run_specs("--profile", str(mine), cache=tmp_path / "cache")
    assert result.returncode == 0, result.stderr
    ran = subprocess.run([sys.executable, "-m", "pytest", "specs", "-p", "no:cacheprovider", "--benchmark-skip",
                          "--profile", str(mine), "-k", "table2_row and fusion_gpu", "-rs", "-q"], cwd=PROJECT_ROOT,
                         capture_output=True, text=True, env={**os.environ, "NEVIR_CACHE_DIR": str(tmp_path / "cache")},
                         timeout=600)
    assert ran.returncode == 0, ran.stdout[-3000:]
    assert re.search(r"SKIPPED .*fusion_gpu: a CUDA device is not available here", ran.stdout), ran.stdout[-3000:]
    assert not (tmp_path / "cache" / "pools").exists()  # skipped before any work


def test_max_judge_minutes_is_read_once_into_settings(tmp_path: Path) -> None:
    from harness.options import OPTIONS, settings_from

    values = {flag.lstrip("-").replace("-", "_"): kwargs.get("default") for flag, kwargs in OPTIONS}
    values.update(max_judge_minutes=12.5, cache_dir=str(tmp_path / "cache"), results_dir=str(tmp_path / "results"))
    assert settings_from(values.get).max_judge_minutes == 12.5
    values.update(max_judge_minutes=None)
    assert settings_from(values.get).max_judge_minutes is None


def test_a_run_file_holding_another_split_s_queries_stops_the_run_with_one_message(tmp_path: Path) -> None:
    """Such a run failed after 32 s of work as four tracebacks; now it is one usage error before any work."""
    run = tmp_path / "runs" / "test.trec"
    run.parent.mkdir()
    run.write_text("1000-2_q1 Q0 p1 1 1.0 theirs\n444-2_q1 Q0 p1 1 1.0 theirs\n", encoding="utf-8")
    profile = tmp_path / "mine.toml"
    profile.write_text('[profile]\nname = "mine"\nextends = "embedded"\n'
                       '[rankers.theirs]\nkind = "trec_run"\npath = "runs/{split}.trec"\n', encoding="utf-8")
    result = run_specs("--profile", str(profile), "--splits", "test", cache=tmp_path / "cache")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    assert (f"{profile} [rankers.theirs]: run file {run}:2: qid '444-2_q1' is a direction of split 'confirmation', "
            "but the file is read for split 'test'") in result.stderr
    assert "Traceback" not in result.stderr + result.stdout and not (tmp_path / "cache" / "pools").exists()
