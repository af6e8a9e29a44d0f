"""A results or cache folder that fills up or turns read-only mid-run: one clear error, the previous results kept,
no corrupt or cut file left behind.

Each folder under test is a small tmpfs mounted for the test (``mount -t tmpfs``, root only), so
"full" and "read-only" are the kernel's own ENOSPC and EROFS, whoever runs the test; where mounting is
not allowed the tests skip and say so. The runs are the publishing fault tests' small project
(``fake_project``); a run is made read-only mid-run while it is held computing (``tests.support.hold``).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import fake_project as fake
from fixtures.artifacts import atomic_write_text
from fixtures.settings import PROJECT_ROOT
from rankers.scorers.cache import CachedScore, ScoreCache
from reports.history import HISTORY, save_to_history, saved_runs, saved_split
from reports.transaction import RUNS, current_run
from tests.reports.saved_runs import small_run
from tests.support.hold import Hold
from tests.support.score_cache import cache_key, stored_count


@contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``path`` for the block; skips the test where mounting is not allowed."""
    path.mkdir(parents=True, exist_ok=True)
    if shutil.which("mount") is None:
        pytest.skip("no mount command here: the disk-full and read-only faults need a small tmpfs")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not allowed here ({done.stderr.strip() or done.returncode}): the "
                    "disk-full and read-only faults need one (run them as root)")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def remount(path: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(path)], check=True, capture_output=True)


def fill(folder: Path, leave: int = 0) -> Path:
    """Fill the file system of ``folder`` up to ``leave`` bytes with one file; returns it."""
    filler = folder / ".filler"
    stat = os.statvfs(folder)
    with open(filler, "wb") as fh:
        try:
            fh.write(b"\0" * max(stat.f_bavail * stat.f_frsize - leave, 0))
        except OSError:  # ENOSPC before the end: as full as it gets
            pass
    return filler


def _left_behind(results: Path) -> list[str]:
    runs = results / RUNS
    kept = (current_run(results), f"{current_run(results)}.lock")  # the run in place and its lock
    return sorted(p.name for p in runs.iterdir() if p.name not in kept) \
        if runs.is_dir() else []


@pytest.fixture
def project(tmp_path: Path) -> Iterator[tuple[Path, Path, dict[str, str]]]:
    """The small project with one complete run published into a 4 MB tmpfs."""
    folder = fake.write(tmp_path / "project")
    with tmpfs(tmp_path / "results", "4m") as results:
        first = fake.run(folder, results, FAKE_STRICT="3")
        assert first.returncode == 0, first.stdout[-3000:]
        yield folder, results, fake.published(results)


def test_a_results_disk_that_fills_keeps_the_previous_results_with_one_clear_error(project) -> None:
    folder, results, before = project
    filler = fill(results, leave=16 << 10)
    full = fake.run(folder, results, FAKE_STRICT="4")
    assert full.returncode == 1, full.stdout[-3000:]
    assert full.stdout.count("RESULTS NOT PUBLISHED") == 1, full.stdout[-3000:]
    assert "No space left on device" in full.stdout and "keeps the previous complete results" in full.stdout
    assert "Traceback" not in full.stdout and "INTERNALERROR" not in full.stdout + full.stderr
    filler.unlink()
    assert fake.published(results) == before and _left_behind(results) == []
    fake.verify(results)


def test_a_results_dir_made_read_only_mid_run_keeps_the_previous_results_with_one_clear_error(project,
                                                                                              tmp_path: Path) -> None:
    folder, results, before = project
    hold = Hold(tmp_path / "hold")
    proc = subprocess.Popen(fake.command(folder, results), cwd=folder, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            env=fake.environment(**hold.env(), FAKE_STRICT="4", FAKE_HOLD_CLAIM="1"))
    try:
        assert hold.reached(proc), proc.communicate()[0][-3000:]
        remount(results, "ro")  # while the run computes, before it publishes
    finally:
        hold.release()
        out, _ = proc.communicate(timeout=600)
    try:
        assert proc.returncode == 1, out[-3000:]
        assert out.count("RESULTS NOT PUBLISHED") == 1 and "Read-only file system" in out, out[-3000:]
        assert "the previous results are left as they were" in out and "Traceback" not in out
    finally:
        remount(results, "rw")
    assert fake.published(results) == before and _left_behind(results) == []
    fake.verify(results)


def test_a_cache_whose_contents_are_read_only_is_named_in_one_error_before_any_work(tmp_path: Path) -> None:
    """The probe: 178 PermissionErrors on ``.lock`` files, and nothing published."""
    cache = tmp_path / "cache"
    with tmpfs(cache / "scores", "1m"):
        remount(cache / "scores", "ro")
        done = subprocess.run([sys.executable, "-m", "pytest", "specs", "-p", "no:cacheprovider", "--co", "-q",
                               "--cache-dir", str(cache), "--results-dir", str(tmp_path / "results")],
                              cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600,
                              env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    out = done.stdout + done.stderr
    assert done.returncode == 4, out[-3000:]
    assert out.count("are read-only (first: scores)") == 1, out[-3000:]
    assert "PermissionError" not in out and "Traceback" not in out


def test_a_score_cache_on_a_disk_that_fills_keeps_every_committed_chunk_and_no_corrupt_entry(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "scores", "2m") as folder:
        cache = ScoreCache.in_folder(folder)
        reply = "x" * 20_000

        def chunk(i: int) -> list:
            return [(cache_key("m", f"p{i}-{j}", f"q{i}", f"passage {i} {j}"), CachedScore(float(j), None, {}, reply))
                    for j in range(10)]

        committed = 0
        fill(folder, leave=600 << 10)
        with pytest.raises(Exception, match="full") as failure:
            for i in range(1000):
                cache.put_many(chunk(i))
                committed += 1
        assert committed > 0, "the disk was full before the first chunk: nothing to keep"
        assert "score cache" in str(failure.value) and str(cache.path) in str(failure.value)
        cache.close()
        (folder / ".filler").unlink()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a corrupt file would be moved aside with a ScoreCacheWarning
            reopened = ScoreCache.in_folder(folder)
        assert stored_count(reopened) == 10 * committed  # every committed chunk, whole; the failed one not at all
        found, bad = reopened.lookup([k for i in range(committed) for k, _ in chunk(i)])
        assert len(found) == 10 * committed and bad == []


def test_an_artifact_written_to_a_full_disk_leaves_neither_a_cut_file_nor_a_temporary_one(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "cache", "1m") as folder:
        atomic_write_text(folder / "memo.json", "{}")
        fill(folder, leave=4 << 10)
        with pytest.raises(OSError, match="No space left"):
            atomic_write_text(folder / "memo.json", "x" * (64 << 10))
        assert (folder / "memo.json").read_text() == "{}"
        assert sorted(p.name for p in folder.iterdir()) == [".filler", "memo.json"]


def test_an_export_to_a_disk_that_fills_keeps_the_previous_export(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    command = [sys.executable, "-m", "harness.export", "--splits", "test", "--subset-pairs", "24", "--out"]
    with tmpfs(tmp_path / "pools", "48m") as out:
        first = subprocess.run([*command, str(out)], cwd=PROJECT_ROOT, capture_output=True, text=True, env=env,
                               timeout=1800)
        assert first.returncode == 0, first.stderr[-3000:]
        before = current_run(out)
        listing = sorted(p.name for p in (out / "test").iterdir())
        fill(out, leave=64 << 10)
        full = subprocess.run([*command, str(out)], cwd=PROJECT_ROOT, capture_output=True, text=True, env=env,
                              timeout=1800)
        assert full.returncode == 1, full.stderr[-3000:]
        assert f"error: cannot export into {out}" in full.stderr and "No space left on device" in full.stderr
        assert "Traceback" not in full.stderr
        assert current_run(out) == before and sorted(p.name for p in (out / "test").iterdir()) == listing
        assert _left_behind(out) == []



def test_a_history_that_cannot_be_saved_leaves_no_empty_or_cut_file(tmp_path: Path) -> None:
    """The probe: a results disk that filled after publishing left ``.history/<id>`` with a 0-byte file and a
    cut ``cost.json``."""
    records = small_run(tmp_path / "records")
    published = {}
    for split in records:
        published[split] = tmp_path / "published" / split
        published[split].mkdir(parents=True)
        for name in ("table2.csv", "cost.json", "report.md", "manifest.json"):
            (published[split] / name).write_text(json.dumps({"padding": name * 4000}))
    with tmpfs(tmp_path / "results", "1m") as results:
        fill(results, leave=40 << 10)
        with pytest.raises(OSError, match="No space left"):
            save_to_history(results, "r1", records, published)
        assert sorted(p.name for p in (results / HISTORY).iterdir()) == [], "the history kept a partial run"
        assert saved_runs(results) == []
        (results / ".filler").unlink()
        saved = save_to_history(results, "r1", records, published)
        assert saved.healed is None and saved_runs(results) == ["r1"]
        for split, folder in published.items():
            kept = saved.path / split
            assert all((kept / p.name).read_bytes() == p.read_bytes() for p in folder.iterdir())
            assert saved_split(results, "r1", split).table2().equals(records[split].tables["table2"])
