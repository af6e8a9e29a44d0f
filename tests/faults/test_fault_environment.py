"""Refusals of the environment: one message before any work, with the exit code of every other refusal.

The probe: a memo key file with mode 644, inside the cache, empty or a folder was refused as 9 failed specs in about
830 lines (exit 1, with a footer about a partial selection); a cache on a full disk gave a partial run with 2 failed
specs (ENOSPC while copying a shipped pool); ``evaluate(cache_dir=123)`` raised a bare TypeError, ``rankers=[]`` ran
an empty run and ``publish(None)`` raised an AttributeError. Now each is refused before anything is computed: the
command line as a usage error (exit 4, one ``ERROR:`` line, before collection), ``evaluate()`` and ``publish()`` as
``OptionError`` naming the argument or file (docs/reproducibility.md#refusals-before-any-work).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.settings import PROJECT_ROOT
from fixtures.userkey import KEY_ENV
from harness.options import OptionError
from harness.run import evaluate, publish
from tests.faults.test_fault_disk import tmpfs

#: The cheapest selection of a real run: fusion's Test row on the CI subset.
SELECTION = ("--splits", "test", "--subset-pairs", "24", "-k", "table2_row and fusion")


def bad_key(tmp_path: Path, fault: str) -> Path:
    """A memo key file with ``fault``: readable by others, inside the cache, empty, or a folder."""
    path = tmp_path / ("cache" if fault == "inside" else "config") / "memo.key"
    path.parent.mkdir(parents=True)
    if fault == "folder":
        path.mkdir()
    else:
        path.write_bytes(b"" if fault == "empty" else os.urandom(32))
        path.chmod(0o644 if fault == "mode" else 0o600)
    return path


def specs(tmp_path: Path, cache: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "specs", "-p", "no:cacheprovider", *SELECTION,
                           "--cache-dir", str(cache), "--results-dir", str(tmp_path / "results")],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **env})


def one_usage_error(done: subprocess.CompletedProcess) -> str:
    """The output of a run refused before collection: exit 4, one error line, no spec run."""
    out = done.stdout + done.stderr
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    assert out.count("ERROR:") == 1 and "failed" not in out and "Traceback" not in out, out[-3000:]
    assert len(out.splitlines()) < 10, out[-3000:]
    return out


@pytest.mark.parametrize("fault,words", [("mode", r"mode 0600 \(it has uid"), ("inside", "lies inside the cache"),
                                         ("empty", "holds 0 bytes"), ("folder", "Is a directory")])
def test_a_bad_memo_key_is_refused_before_any_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str,
                                                    words: str) -> None:
    key = bad_key(tmp_path, fault)
    monkeypatch.setenv(KEY_ENV, str(key))
    with pytest.raises(OptionError, match=words) as caught:
        evaluate("embedded", splits=["test"], subset_pairs=24, rankers=["fusion"], cache_dir=tmp_path / "cache")
    assert str(key) in str(caught.value)
    assert not (tmp_path / "cache" / "pools").exists()  # nothing was computed


@pytest.mark.parametrize("fault", ["mode", "folder"])
def test_the_command_line_refuses_a_bad_memo_key_in_one_message_before_collection(tmp_path: Path,
                                                                                  fault: str) -> None:
    key = bad_key(tmp_path, fault)
    out = one_usage_error(specs(tmp_path, tmp_path / "cache", **{KEY_ENV: str(key)}))
    assert f"memo key {key}" in out and not (tmp_path / "cache" / "pools").exists()


def test_a_cache_that_cannot_hold_the_shipped_inputs_is_refused_before_copying(tmp_path: Path) -> None:
    """A 4 MB cache cannot hold the 8.6 MB shipped Test pool: refused naming what it would copy, nothing copied."""
    with tmpfs(tmp_path / "cache", "4m") as cache:
        with pytest.raises(OptionError, match=r"MB free, but this run copies .*data/pools/test\.parquet") as caught:
            evaluate("embedded", splits=["test"], rankers=["fusion"], cache_dir=cache)
        assert f"--cache-dir {cache}" in str(caught.value)
        assert not list(cache.rglob("*.parquet"))  # nothing copied
        out = one_usage_error(specs(tmp_path, cache))
        assert "data/pools/train.parquet" in out and "nothing was copied" in out


@pytest.mark.parametrize("call,words", [
    (lambda tmp: evaluate("embedded", cache_dir=123), r"cache_dir must be a path .* got 123 \(int\)"),
    (lambda tmp: evaluate("embedded", results_dir=["results"]), r"results_dir must be a path"),
    (lambda tmp: evaluate("embedded", rankers=[], cache_dir=tmp), r"rankers=\[\] selects no ranker"),
    (lambda tmp: evaluate("embedded", max_judge_minutes="5", cache_dir=tmp), r"max_judge_minutes must be a number"),
    (lambda tmp: evaluate("embedded", retrain="no", cache_dir=tmp), r"retrain must be True or False"),
    (lambda tmp: publish(None), r"publish takes the RunRecord evaluate\(\) returned, got None"),
], ids=["cache_dir", "results_dir", "no-rankers", "minutes", "flag", "publish-none"])
def test_evaluate_and_publish_refuse_arguments_of_the_wrong_type_by_name(tmp_path: Path, call, words: str) -> None:
    with pytest.raises(OptionError, match=words):
        call(tmp_path / "cache")
    assert not (tmp_path / "cache" / "pools").exists()
