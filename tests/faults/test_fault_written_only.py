"""Publishing deletes only what it recorded writing (``reports.ledger``, docs/outputs.md#whose-folder).

The probe: in a folder carrying a copied suite mark, publishing deleted a user's ``.history/vscode/``,
``.runs/legacy-7/`` and ``.runs/x/`` ("removed 1 incomplete run"); in a genuine results folder a user's file in
``results/test/`` was deleted silently by the next publish, and an editor's ``.history/analysis/`` was deleted as an
"incomplete run". Now a results or export folder keeps a ledger of what the suite wrote, sealed with the user's key;
a publish removes or replaces only that, a copied mark grants nothing, and what it keeps is named once.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

import fake_project as fake
import harness.export
from reports.ledger import LEDGER
from reports.transaction import MARK, RUNS, current_run
from reports.writer import PublishError, publish
from tests.faults.test_fault_foreign_folder import snapshot
from tests.reports.test_writer import record, run

SPLITS = ("confirmation", "test")
#: What the probe's user kept in a folder: an editor's local history, a folder named like an adopted run, a folder
#: with a lock file beside it named like a staging's (path -> contents).
USERS = {".history/vscode/settings.json": "{}\n", ".history/analysis/notes.md": "my analysis\n",
         f"{RUNS}/legacy-7/keep.txt": "mine\n", f"{RUNS}/x/keep.txt": "mine too\n", f"{RUNS}/x.lock": ""}


def plant(root: Path, entries: dict[str, str]) -> None:
    for name, text in entries.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The small project with one complete run published (its folder and results), made once per module."""
    return fake.published_once(tmp_path_factory.mktemp("template"))


@pytest.fixture
def project(template: Path, tmp_path: Path) -> tuple[Path, Path]:
    shutil.copytree(template, tmp_path / "copy", symlinks=True)
    return tmp_path / "copy" / "project", tmp_path / "copy" / "results"


def kept_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if "the suite did not write" in line]


def test_a_copied_mark_grants_nothing_and_nothing_of_the_users_is_deleted(project, tmp_path: Path) -> None:
    folder, results = project
    mine = tmp_path / "mine"
    plant(mine, USERS)
    shutil.copyfile(results / MARK, mine / MARK)
    before = snapshot(mine)
    result = fake.run(folder, mine, FAKE_STRICT="4")
    assert result.returncode == 1, result.stdout[-3000:]
    assert "RESULTS NOT PUBLISHED" in result.stdout and f"{mine} is not a folder this suite made" in result.stdout
    assert f"copied {MARK} grants nothing" in result.stdout.replace("\n", "")
    assert "removed" not in result.stdout and snapshot(mine) == before  # nothing deleted, nothing written
    with pytest.raises(PublishError, match="not a folder this suite made"):  # the library's publish too
        publish(mine, "r1", {s: record(3, s) for s in SPLITS})
    assert snapshot(mine) == before


def test_a_copied_ledger_lists_nothing_of_the_users_so_it_is_all_kept(project, tmp_path: Path) -> None:
    """A mark and a ledger copied from a genuine results folder (this user's key: it verifies) make the folder the
    suite's, but list the genuine folder's runs, not the user's entries: all of these are kept and named."""
    _, results = project
    mine = tmp_path / "mine"
    plant(mine, USERS)
    for name in (MARK, LEDGER):
        shutil.copyfile(results / name, mine / name)
    kept: list[str] = []
    publish(mine, "r1", {s: record(3, s) for s in SPLITS}, kept=kept)
    assert {k: (mine / k).read_text() for k in USERS} == USERS
    assert kept == [f"{RUNS}/legacy-7/", f"{RUNS}/x/"]  # publish cleans .runs; the history's save its own


def test_in_a_genuine_folder_what_the_user_put_there_is_kept_and_named_once(project) -> None:
    folder, results = project
    plant(results, USERS)
    (results / "test" / "notes.md").write_text("my notes beside the published files\n")  # into .runs/<run>/test
    old = current_run(results)
    second = fake.run(folder, results, FAKE_STRICT="4")
    assert second.returncode == 0, second.stdout[-3000:]
    [line] = kept_lines(second.stdout)  # one line names every entry kept
    for name in (".history/vscode/", ".history/analysis/", f"{RUNS}/legacy-7/", f"{RUNS}/x/",
                 f"{RUNS}/{old}/test/notes.md"):
        assert name in line, line
    assert "history: removed" not in second.stdout  # the editor's history is no incomplete run
    assert {k: (results / k).read_text() for k in USERS} == USERS
    assert (results / RUNS / old / "test" / "notes.md").read_text() == "my notes beside the published files\n"
    assert sorted(p.relative_to(results / RUNS / old).as_posix() for p in (results / RUNS / old).rglob("*")) == \
        ["test", "test/notes.md"]  # the old run's own files are gone
    fake.verify(results)
    third = fake.run(folder, results, FAKE_STRICT="5")
    assert third.returncode == 0 and kept_lines(third.stdout) == [], third.stdout[-3000:]  # said once
    assert {k: (results / k).read_text() for k in USERS} == USERS
    assert (results / RUNS / old / "test" / "notes.md").is_file() and fake.strict(results, "test")[0] == 5


def test_an_edited_ledger_grants_nothing(tmp_path: Path) -> None:
    """A ledger whose list was extended by hand (its HMAC no longer verifies) lists nothing: the user's folder it
    names is kept."""
    run(tmp_path, "r1", 3)
    plant(tmp_path, {f"{RUNS}/mine/keep.txt": "mine\n"})
    ledger = json.loads((tmp_path / LEDGER).read_text())
    ledger["folders"][f"{RUNS}/mine"] = ["keep.txt"]
    (tmp_path / LEDGER).write_text(json.dumps(ledger))
    run(tmp_path, "r2", 4)
    assert (tmp_path / RUNS / "mine" / "keep.txt").read_text() == "mine\n"


def test_an_export_carries_and_removes_only_what_it_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A user's file in an exported split folder is neither carried into the next export nor deleted with the
    previous one: it is kept where it was, and named once on stderr."""
    def export_split(ev, split, out, depth):
        (out / "queries.tsv").write_text(f"{split}_q1\tq\n")
        return {}

    monkeypatch.setattr(harness.export, "export_split", export_split)
    out = tmp_path / "pools"
    harness.export.export(SimpleNamespace(settings=SimpleNamespace(splits=SPLITS)), out, export_id="e1")
    (out / "confirmation" / "mine.txt").write_text("mine\n")
    capsys.readouterr()
    harness.export.export(SimpleNamespace(settings=SimpleNamespace(splits=("test",))), out, export_id="e2")
    assert sorted(os.listdir(out / "confirmation")) == ["queries.tsv"]  # carried: the suite's file only
    assert (out / RUNS / "e1" / "confirmation" / "mine.txt").read_text() == "mine\n"
    assert sorted(p.name for p in (out / RUNS / "e1").rglob("*")) == ["confirmation", "mine.txt"]
    assert f"{RUNS}/e1/confirmation/mine.txt" in capsys.readouterr().err
