"""Publishing into a foreign folder: the suite writes only into folders it made, and replaces only what it wrote.

The probe published (``publish(record, DIR)``, ``--results-dir DIR``, ``harness.export --out DIR``) into a folder
that was not a results folder: a user's file ``test`` became a symlink, a user's ``baseline/`` holding a
``table2.csv`` was deleted with its other files, and a folder under ``.runs/`` and a dangling link were removed.
Now a non-empty folder the suite did not make is refused with one message naming it and what it holds, before
anything is written, and inside its own folder a run never moves, links over or deletes what the user put there
(docs/outputs.md#whose-folder).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from fixtures.settings import PROJECT_ROOT
from harness.export import export
from harness.options import OptionError, settings_from
from reports.transaction import MARK, RUNS, ForeignFolder, current_run
from reports.writer import PublishError, publish
from tests.reports.test_writer import published, record, run

SPLITS = ("confirmation", "test")


def user_folder(root: Path) -> dict[str, str]:
    """A user's folder holding a file named like a split, a folder holding a ``table2.csv``, a run-like folder
    under ``.runs/`` and a dangling link; returns what it holds (path -> contents or link target)."""
    (root / "baseline").mkdir(parents=True)
    (root / "test").write_text("my notes named test\n")
    (root / "baseline" / "table2.csv").write_text("ranker,strict\nmine,7\n")
    (root / "baseline" / "other.txt").write_text("beside it\n")
    (root / RUNS / "mine").mkdir(parents=True)
    (root / RUNS / "mine" / "keep.txt").write_text("debris of mine\n")
    os.symlink("nowhere", root / "dangling")
    return snapshot(root)


def snapshot(root: Path) -> dict[str, str]:
    out = {}
    for path in sorted(root.rglob("*")):
        key = path.relative_to(root).as_posix()
        if path.is_symlink():
            out[key] = "-> " + os.readlink(path)
        elif path.is_file():
            out[key] = path.read_bytes().decode("utf-8", "replace")
    return out


def test_publishing_into_a_foreign_folder_is_refused_naming_it_and_what_it_holds(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    before = user_folder(folder)
    with pytest.raises(PublishError) as caught:
        publish(folder, "r1", {s: record(3, s) for s in SPLITS})
    message = str(caught.value)
    assert str(folder) in message and "not a folder this suite made" in message
    assert "baseline/" in message and "dangling@" in message and "test" in message
    assert snapshot(folder) == before  # nothing moved, linked over or deleted
    assert not (folder / MARK).exists() and current_run(folder) is None


def test_a_foreign_results_dir_is_one_message_before_any_work(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    before = user_folder(folder)
    options = {"splits": "test", "results_dir": str(folder), "cache_dir": str(tmp_path / "cache"),
               "data_dir": None, "profile": "embedded", "subset_pairs": None, "subset_seed": 0,
               "grader_sample": None, "max_judge_minutes": None, "compare_to": None, "gate_expectations": False}
    with pytest.raises(OptionError) as caught:
        settings_from(options.get)
    assert str(caught.value).count("--results-dir") == 1 and str(folder) in str(caught.value)
    assert snapshot(folder) == before
    options["results_dir"] = str(tmp_path / "new")  # a new folder (or an empty one) is the suite's to make
    assert settings_from(options.get).results_dir == tmp_path / "new"


def test_an_export_into_a_foreign_folder_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    before = user_folder(folder)
    ev = SimpleNamespace(settings=SimpleNamespace(splits=SPLITS))  # refused before the evaluation is asked
    with pytest.raises(ForeignFolder, match="not a folder this suite made"):
        export(ev, folder)  # type: ignore[arg-type]
    assert snapshot(folder) == before


def test_the_export_command_refuses_a_foreign_out_in_one_line_before_any_work(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    before = user_folder(folder)
    result = subprocess.run([sys.executable, "-m", "harness.export", "--out", str(folder), "--splits", "test",
                             "--subset-pairs", "24", "--cache-dir", str(tmp_path / "cache")], cwd=PROJECT_ROOT,
                            capture_output=True, text=True, timeout=600,
                            env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    assert "Traceback" not in result.stderr and result.stderr.count("error:") == 1, result.stderr[-3000:]
    assert f"--out: {folder} is not a folder this suite made" in result.stderr
    assert snapshot(folder) == before and not (tmp_path / "cache" / "pools").exists()  # no pool built


def test_inside_its_own_folder_a_run_replaces_only_what_it_wrote(tmp_path: Path) -> None:
    run(tmp_path, "r1", 3)
    assert (tmp_path / MARK).is_file()
    (tmp_path / "baseline").mkdir()  # the user's, beside the suite's links
    (tmp_path / "baseline" / "table2.csv").write_text("ranker,strict\nmine,7\n")
    (tmp_path / "notes.txt").write_text("mine\n")
    (tmp_path / RUNS / "mine").mkdir()
    (tmp_path / RUNS / "mine" / "keep.txt").write_text("debris of mine\n")
    os.symlink("nowhere", tmp_path / "dangling")
    mine = {k: v for k, v in snapshot(tmp_path).items() if k.split("/")[0] in ("baseline", "notes.txt", "dangling")
            or k.startswith(f"{RUNS}/mine")}
    run(tmp_path, "r2", 4)
    run(tmp_path, "r3", 5)
    assert published(tmp_path) == {s: ("r3", [5]) for s in SPLITS}
    after = snapshot(tmp_path)
    assert {k: after.get(k) for k in mine} == mine
    assert sorted(p.name for p in (tmp_path / RUNS).iterdir() if p.is_dir()) == ["mine", "r3"]


def test_a_user_file_where_a_split_link_goes_is_refused_and_kept(tmp_path: Path) -> None:
    run(tmp_path, "r1", 3)
    (tmp_path / "test").unlink()
    (tmp_path / "test").write_text("my own test file\n")
    with pytest.raises(PublishError, match=r"holds 1 entry \(test\) where the suite would put its own links"):
        run(tmp_path, "r2", 4)
    assert (tmp_path / "test").read_text() == "my own test file\n" and current_run(tmp_path) == "r1"


@pytest.mark.parametrize("layout", ["history", "current", "split-folders"])
def test_results_of_earlier_versions_are_recognized_and_published_into(tmp_path: Path, layout: str) -> None:
    """A results folder an earlier version made (no mark yet) is the suite's: its history, its ``.current`` link
    into ``.runs``, or its older split folders say so; the user's file beside them stays."""
    if layout == "history":
        (tmp_path / ".history" / "r0").mkdir(parents=True)
        (tmp_path / ".history" / "r0" / "entry.json").write_text("{}")
    elif layout == "current":
        (tmp_path / RUNS / "r0" / "test").mkdir(parents=True)
        os.symlink(f"{RUNS}/r0", tmp_path / ".current")
    else:
        for split in SPLITS:
            (tmp_path / split).mkdir()
            (tmp_path / split / "table2.csv").write_text("ranker,strict\nold,1\n")
    (tmp_path / "notes.txt").write_text("mine\n")
    run(tmp_path, "r1", 3)
    assert published(tmp_path) == {s: ("r1", [3]) for s in SPLITS} and (tmp_path / MARK).is_file()
    assert (tmp_path / "notes.txt").read_text() == "mine\n"


def test_results_adopted_by_an_earlier_version_are_kept_once_replaced_and_named(tmp_path: Path) -> None:
    """Earlier versions adopted an older layout into ``.runs/legacy-<pid>``: the ledger does not list what it holds
    (whoever named a folder ``legacy-7`` could have made it), so the run that replaces it keeps it and names it once,
    as it does a user's folder under ``.runs`` (docs/outputs.md#whose-folder)."""
    (tmp_path / RUNS / "legacy-4242" / "test").mkdir(parents=True)
    (tmp_path / RUNS / "legacy-4242" / "test" / "table2.csv").write_text("ranker,strict\nold,1\n")
    os.symlink(f"{RUNS}/legacy-4242", tmp_path / ".current")
    os.symlink(".current/test", tmp_path / "test")
    (tmp_path / RUNS / "legacy-notes").mkdir()
    kept: list[str] = []
    run(tmp_path, "r1", 3, kept=kept)
    assert published(tmp_path) == {s: ("r1", [3]) for s in SPLITS}
    assert sorted(p.name for p in (tmp_path / RUNS).iterdir() if p.is_dir()) == ["legacy-4242", "legacy-notes", "r1"]
    assert sorted(kept) == [f"{RUNS}/legacy-4242/", f"{RUNS}/legacy-notes/"]
    again: list[str] = []
    run(tmp_path, "r2", 4, kept=again)
    assert again == [] and (tmp_path / RUNS / "legacy-4242" / "test" / "table2.csv").is_file()  # named once


def test_a_history_folder_of_another_tool_does_not_make_a_folder_the_suites(tmp_path: Path) -> None:
    """An editor's local history (``.history/notes_20261201.md``) is not a results folder of the suite's."""
    (tmp_path / ".history").mkdir()
    (tmp_path / ".history" / "notes_20261201.md").write_text("an editor's copy\n")
    (tmp_path / "notes.md").write_text("mine\n")
    with pytest.raises(PublishError, match="not a folder this suite made"):
        run(tmp_path, "r1", 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".history", "notes.md"]
