"""Faults at publishing time: every split under results/ comes from one complete run, whatever happens.

Each test reproduces one failure of the fault probe (partial selections, interrupts, an
exception at session end, hard links into the cache, a bad ranker) on a small project that
reports through the suite's plugin (``fake_project``), so an interrupt lands at a chosen point.
"""
from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest

import fake_project as fake
from fixtures.settings import PROJECT_ROOT
from tests.support.hold import Hold


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project with one complete run (strict = 3) published, made once per module."""
    return fake.published_once(tmp_path_factory.mktemp("template"))


@pytest.fixture
def project(template: Path, tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A copy of the template (folder, results, the published run's ids), links kept as links."""
    shutil.copytree(template, tmp_path / "copy", symlinks=True)
    folder, results = tmp_path / "copy" / "project", tmp_path / "copy" / "results"
    runs = fake.published(results)
    assert len(set(runs.values())) == 1
    return folder, results, runs


@pytest.mark.parametrize("selection", [("-k", "table2_row and fusion"), ("test_spec.py::test_table2_row",), ("-x",)],
                         ids=["k", "node-id", "stopped-early"])
def test_a_partial_run_never_replaces_complete_results(project, selection) -> None:
    """Failure 2: a `-k` selection exited 0 and left results/test with three rows and no claims or Table I."""
    folder, results, before = project
    partial = fake.run(folder, results, *selection, FAKE_STRICT="4",
                       **({"FAKE_BROKEN": "e0"} if selection == ("-x",) else {}))
    assert fake.published(results) == before  # the complete run stands, whole
    assert all(fake.strict(results, s) == [3, 3, 3] for s in fake.SPLITS)
    assert "PARTIAL RUN" in partial.stdout and str(results / "partial") in partial.stdout, partial.stdout[-3000:]
    assert "keeps the last complete run" in partial.stdout
    assert fake.strict(results / "partial", "test")[0] == 4  # what the selection computed, apart
    fake.verify(results)


def test_a_full_run_after_a_partial_one_publishes_complete_results(project) -> None:
    folder, results, before = project
    fake.run(folder, results, "-k", "table2_row and fusion", FAKE_STRICT="4")
    full = fake.run(folder, results, FAKE_STRICT="5")
    assert full.returncode == 0, full.stdout[-3000:]
    runs = fake.published(results)
    assert len(set(runs.values())) == 1 and runs != before
    assert all(fake.strict(results, s) == [5, 5, 5] for s in fake.SPLITS)
    fake.verify(results)


def test_sigint_during_publishing_leaves_one_run_exits_2_without_a_traceback(project, tmp_path: Path) -> None:
    """Failure 4: exit 130 with a raw traceback, `confirmation` from the new run and `test` from the old."""
    folder, results, before = project
    result, sent = fake.interrupt_at(folder, results, Hold(tmp_path / "hold", "publish:test"), signal.SIGINT,
                                     release=True, FAKE_STRICT="4")
    assert sent, "the run never reached publishing:\n" + result.stdout[-3000:]
    assert result.returncode == 2, result.stdout[-3000:]
    assert "Traceback" not in result.stdout and "KeyboardInterrupt" not in result.stdout, result.stdout[-3000:]
    runs = fake.published(results)
    assert len(set(runs.values())) == 1, f"splits from different runs: {runs}"
    assert runs == before and "INTERRUPTED while publishing" in result.stdout
    fake.verify(results)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_a_publisher_killed_while_staging_leaves_one_run_and_the_next_cleans_up(project, sig, tmp_path: Path) -> None:
    folder, results, before = project
    killed, sent = fake.interrupt_at(folder, results, Hold(tmp_path / "hold", "publish:test"), sig,
                                     release=sig == signal.SIGTERM, FAKE_STRICT="4")
    assert sent, killed.stdout[-3000:]
    assert killed.returncode == (-signal.SIGKILL if sig == signal.SIGKILL else 2), killed.stdout[-3000:]
    runs = fake.published(results)
    assert len(set(runs.values())) == 1 and runs == before
    after = fake.run(folder, results, FAKE_STRICT="5")
    assert after.returncode == 0 and len(set(fake.published(results).values())) == 1
    fake.verify(results)
    assert not [p for p in results.rglob("*staging*")]
    assert len([p for p in (results / ".runs").iterdir() if p.is_dir()]) == 1  # the killed run's folder is gone


def test_sigint_while_scoring_exits_2_and_publishes_nothing(project, tmp_path: Path) -> None:
    """Failure 4: SIGINT during scoring exited 1 (an interrupted run's "RESULTS NOT PUBLISHED" counted as a
    failure), not pytest's 2."""
    folder, results, before = project
    result, sent = fake.interrupt_at(folder, results, Hold(tmp_path / "hold"), signal.SIGINT, FAKE_STRICT="4",
                                     FAKE_HOLD_CLAIM="1")
    assert sent and result.returncode == 2, result.stdout[-3000:]
    assert fake.published(results) == before


INJECT = '''
import reports.{module} as target

real = target.{function}


def broken(*args, **kwargs):
    if {condition}:
        raise RuntimeError("deliberate failure at session end")
    return real(*args, **kwargs)


target.{function} = broken
'''


@pytest.mark.parametrize("where", [
    ("writer", "write_figures", "'test' in str(args[0])"),  # while staging the last split
    ("history", "save_to_history", "True"),  # after publishing, while keeping the run in the history
], ids=["staging", "history"])
def test_an_exception_in_session_finish_never_publishes_a_partial_set_of_splits(project, where) -> None:
    """An error at session end once left one split of the new run beside one of the old."""
    folder, results, before = project
    module, function, condition = where
    (folder / "inject.py").write_text(INJECT.format(module=module, function=function, condition=condition))
    result = fake.run(folder, results, "-p", "inject", FAKE_STRICT="4",
                      PYTHONPATH=f"{folder}{os.pathsep}{PROJECT_ROOT}")
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert "deliberate failure at session end" in result.stdout and "INTERNALERROR" not in result.stdout + result.stderr
    runs = fake.published(results)
    assert len(set(runs.values())) == 1, f"splits from different runs: {runs}"
    if module == "writer":
        assert runs == before  # nothing was swapped in
    fake.verify(results)


def test_published_files_are_independent_copies_checked_by_the_manifest(tmp_path: Path) -> None:
    """Failure 3: published runs and pools were hard links into the cache; manifest.json had no file digests."""
    folder, results = fake.write(tmp_path / "project"), tmp_path / "results"
    assert fake.run(folder, results, FAKE_STRICT="3").returncode == 0
    fake.verify(results)
    for split in fake.SPLITS:
        for name in ("runs/fusion.trec", "pool.parquet"):
            assert (results / split / name).stat().st_nlink == 1, f"{split}/{name} is linked into the cache"
    cached = next((folder / "cache" / "results").glob("run-fusion-test-3.trec"))
    with open(results / "test" / "runs" / "fusion.trec", "a") as fh:
        fh.write("test_q9 Q0 p9 2 0 fusion\n")
    assert cached.read_text().count("\n") == 1  # the cache did not change with the published file
    with pytest.raises(AssertionError, match="differs from its manifest digest"):
        fake.verify(results)  # and the manifest tells the edit


def test_a_bad_ranker_costs_only_its_own_rows_and_is_listed_with_its_error(project) -> None:
    """Failure 7 (publishing side): the run is published whole, under partial/ (a part failed, so it is not
    complete and the last complete run stands); the bad ranker's error is in report.md and manifest.json."""
    folder, results, before = project
    result = fake.run(folder, results, FAKE_STRICT="6", FAKE_BROKEN="e0")
    assert result.returncode == 1
    assert fake.published(results) == before and "PARTIAL RUN" in result.stdout
    for split in fake.SPLITS:
        assert fake.strict(results / "partial", split) == [6, 6]  # fusion and ce
        report = (results / "partial" / split / "report.md").read_text()
        assert "e0: deliberately broken declaration" in report
        manifest = (results / "partial" / split / "manifest.json").read_text()
        assert f"test_table2_row[{split}-e0]" in manifest and "deliberately broken" in manifest
    fake.verify(results)