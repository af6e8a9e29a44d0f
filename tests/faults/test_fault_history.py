"""A run killed, or out of disk, while it saves its history leaves no run behind that ``--compare-to`` could use,
and the next save removes what it left and says so (``reports.history``).

The probe: SIGKILL during the history save left ``.staging-*`` folders under ``results/.history/`` and entries
listed as incomplete, and a full disk left an incomplete entry while the results were published; later runs kept
every leftover. Each kill here lands where the saving process holds itself (``tests.support.hold``: it writes a
marker file and waits), never after a guessed delay; the full disk is an ``OSError(ENOSPC)`` injected at one
chosen write. ``python -m tests.support.under_load tests/faults/test_fault_history.py`` runs them under load.
"""
from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import fake_project as fake
import reports.history as history
from fixtures.settings import PROJECT_ROOT
from reports.history import HISTORY, STAGING, HistoryError, compare_problem, saved_runs, saved_split
from tests.reports.saved_runs import save, small_run
from tests.support.hold import Hold

BEFORE, KILLED, AFTER = "20261101T000000.1Z-before", "20261102T000000.2Z-killed", "20261103T000000.3Z-after"
#: A save that holds itself at ``point``: ``copying`` (the first split's files are copied, its digests not yet
#: taken) or ``staged`` (``entry.json`` is written inside the staging folder, not yet renamed into place).
SAVER = '''
import os
import sys
from pathlib import Path

import reports.history as history
from tests.reports.saved_runs import save, small_run
from tests.support.hold import MARKER, RELEASE, hold_here

results, ident, point, folder = Path(sys.argv[1]), sys.argv[2], sys.argv[3], Path(sys.argv[4])
name = {"copying": "folder_digests", "staged": "atomic_write_text"}[point]
real = getattr(history, name)


def held(*args, **kwargs):
    if point == "copying":
        hold_here(Path(os.environ[MARKER]), Path(os.environ[RELEASE]))
    out = real(*args, **kwargs)
    if point == "staged":
        hold_here(Path(os.environ[MARKER]), Path(os.environ[RELEASE]))
    return out


setattr(history, name, held)
save(results, ident, small_run(folder, strict_shift=1))
'''


def _saving(tmp_path: Path, results: Path, point: str) -> tuple[subprocess.Popen, Hold]:
    """A save of ``KILLED`` in another process, held at ``point`` (the test has waited for it to get there)."""
    hold = Hold(tmp_path / f"hold-{point}")
    env = {**os.environ, **hold.env(), "PYTHONPATH": str(PROJECT_ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", SAVER, str(results), KILLED, point, str(tmp_path / "killed")],
                            cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if not hold.reached(proc):
        out, err = proc.communicate()
        pytest.fail(f"the save never reached {point!r} (exit {proc.returncode}):\n{out[-2000:]}\n{err[-3000:]}")
    return proc, hold


def _listing(results: Path) -> list[str]:
    return sorted(p.name for p in (results / HISTORY).iterdir())


@pytest.mark.parametrize("point", ["copying", "staged"])
def test_a_save_killed_midway_leaves_no_usable_run_and_the_next_save_removes_what_it_left(tmp_path: Path,
                                                                                        point: str) -> None:
    results = tmp_path / "results"
    save(results, BEFORE, small_run(tmp_path / "before"))
    proc, _ = _saving(tmp_path, results, point)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    assert _listing(results) == [f"{STAGING}{KILLED}", f"{STAGING}{KILLED}.lock", BEFORE]  # what the kill left
    assert saved_runs(results) == [BEFORE]  # never listed
    with pytest.raises(HistoryError, match=f"--compare-to {KILLED}: saved run {KILLED} is incomplete"):
        saved_split(results, KILLED, "test")
    assert f"saved run {KILLED} is incomplete" in compare_problem(results, KILLED, ["test", "confirmation"])

    saved = save(results, AFTER, small_run(tmp_path / "after"))
    assert saved.healed == (f"history: removed 1 incomplete run(s) left by killed or failed saves in "
                            f"{results / HISTORY} ({STAGING}{KILLED})")
    assert _listing(results) == [BEFORE, AFTER] and saved_runs(results) == [BEFORE, AFTER]
    assert saved_split(results, AFTER, "confirmation").table2()["strict"].tolist() == [14]
    assert save(results, "20261104T000000Z-again", small_run(tmp_path / "again")).healed is None


def test_a_save_in_progress_in_another_process_is_left_alone(tmp_path: Path) -> None:
    """The next save removes only what no live process holds: a run being saved meanwhile completes."""
    results = tmp_path / "results"
    proc, hold = _saving(tmp_path, results, "copying")
    saved = save(results, AFTER, small_run(tmp_path / "after"))
    assert saved.healed is None and f"{STAGING}{KILLED}" in _listing(results)
    assert saved_runs(results) == [AFTER]
    hold.release()
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-2000:] + err[-3000:]
    assert _listing(results) == [KILLED, AFTER] and saved_runs(results) == [KILLED, AFTER]
    assert saved_split(results, KILLED, "test").outcomes("fusion") is not None


def _full_disk(monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """Make the chosen write of the save fail as a full disk does."""
    def refuse(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    if where == "copy":  # the second published file copied
        real, calls = history.shutil.copyfile, []

        def copyfile(*args, **kwargs):
            calls.append(1)
            return refuse() if len(calls) == 2 else real(*args, **kwargs)

        monkeypatch.setattr(history.shutil, "copyfile", copyfile)
    elif where == "outcomes":  # the second split's outcomes.parquet
        real_parquet, written = pd.DataFrame.to_parquet, []

        def to_parquet(frame, path, *args, **kwargs):
            written.append(Path(path))
            if Path(path).name == history.OUTCOMES_FILE and Path(path).parent.name == "confirmation":
                refuse()
            return real_parquet(frame, path, *args, **kwargs)

        monkeypatch.setattr(pd.DataFrame, "to_parquet", to_parquet)
    else:  # entry.json, the last file staged
        monkeypatch.setattr(history, "atomic_write_text", refuse)


@pytest.mark.parametrize("where", ["copy", "outcomes", "entry"])
def test_a_full_disk_during_the_save_leaves_no_run_and_the_next_save_is_whole(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch,
                                                                              where: str) -> None:
    results = tmp_path / "results"
    save(results, BEFORE, small_run(tmp_path / "before"))
    records = small_run(tmp_path / "full")
    with monkeypatch.context() as patched:
        _full_disk(patched, where)
        with pytest.raises(OSError, match="No space left on device"):
            save(results, KILLED, records)
    assert _listing(results) == [BEFORE] and saved_runs(results) == [BEFORE]  # nothing staged, nothing listed
    with pytest.raises(HistoryError, match=f"'{KILLED}' is neither a saved run id"):
        saved_split(results, KILLED, "test")
    saved = save(results, AFTER, records)
    assert saved.healed is None and saved_runs(results) == [BEFORE, AFTER]
    for split in ("test", "confirmation"):
        assert saved_split(results, AFTER, split).outcomes("fusion")["strict"].sum() == 14


def test_a_run_compared_with_an_edited_saved_run_names_the_file_and_compares_nothing(tmp_path: Path) -> None:
    """The probe: editing ``.history/<id>/test/table2.csv`` (fusion MRR 0.5878 -> 0.9999) and running
    ``--compare-to <id>`` exited 0 with the edited value compared. Now the run says which file changed, fails, and
    publishes no comparison."""
    folder, results = fake.write(tmp_path / "project"), tmp_path / "results"
    first = fake.run(folder, results, FAKE_STRICT="3")
    assert first.returncode == 0, first.stdout[-3000:]
    [ident] = saved_runs(results)
    edited = results / HISTORY / ident / "test" / "table2.csv"
    edited.write_text(edited.read_text(encoding="utf-8").replace(",3,", ",9,", 1), encoding="utf-8")
    result = fake.run(folder, results, f"--compare-to={ident}", FAKE_STRICT="3")
    assert result.returncode == 1, result.stdout[-3000:]
    assert f"{edited} was changed after the run saved it" in result.stdout.replace("\n", "")
    assert not (results / "test" / "comparison.csv").exists()
    assert saved_runs(results)[0] == ident and len(saved_runs(results)) == 2  # the new run is kept all the same


def test_a_run_that_finds_what_a_killed_save_left_removes_it_and_says_so_in_one_line(tmp_path: Path) -> None:
    folder, results = fake.write(tmp_path / "project"), tmp_path / "results"
    proc, _ = _saving(tmp_path, results, "copying")  # a save killed while it copies: its staging stays behind
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert f"{STAGING}{KILLED}" in _listing(results)
    result = fake.run(folder, results, FAKE_STRICT="3")
    assert result.returncode == 0, result.stdout[-3000:]
    lines = [line for line in result.stdout.splitlines() if "history: removed" in line]
    assert lines == [f"history: removed 1 incomplete run(s) left by killed or failed saves in {results / HISTORY} "
                     f"({STAGING}{KILLED})"], result.stdout[-3000:]
    assert _listing(results) == saved_runs(results) and len(saved_runs(results)) == 1
