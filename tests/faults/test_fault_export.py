"""A killed or interrupted ``python -m harness.export`` leaves the previous export whole, and nothing staged.

The probe killed the export while it replaced a split (SIGKILL three times, SIGINT three times):
the previous export of that split lost 4–5 files, and SIGKILL left ``.staging-<split>-<pid>``
folders behind, because export removed the old split and then renamed the new one in. It now swaps
the splits in with publishing's transaction (``reports.transaction``). Each export here is held
after it staged the split (``tests.support.hold``, point ``export:test``), signalled there, and the
previous export is checked file by file against its manifest's digests. Killed inside the commit itself
(points ``swap`` and ``swapped``: just before and just after the rename that swaps the export in), the
folder holds the previous export or the new one, whole.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from fixtures.identity import sha256_file
from fixtures.settings import PROJECT_ROOT
from reports.transaction import RUNS, current_run
from tests.support.hold import Hold

SPLIT = "test"
OPTIONS = ("--splits", SPLIT, "--subset-pairs", "24", "--subset-seed", "0")
#: The export's own entry point, after the hold is armed in the same process.
ENTRY = ("import sys; from tests.support.hold import arm; arm(); from harness.export import main; "
         "sys.exit(main(sys.argv[1:]))")


def _command(out: Path) -> list[str]:
    return [sys.executable, "-c", ENTRY, "--out", str(out), *OPTIONS]


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": str(PROJECT_ROOT),
            **extra}


def _export(out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(_command(out), cwd=PROJECT_ROOT, capture_output=True, text=True, env=_env(), timeout=1800)


def complete(out: Path) -> str:
    """The id of the export in place, after checking every file of the split against its manifest's digests."""
    folder = out / SPLIT
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    on_disk = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() and p.name != "manifest.json"}
    assert set(manifest["files"]) == on_disk, f"manifest: {sorted(manifest['files'])}, folder: {sorted(on_disk)}"
    for name, digest in manifest["files"].items():
        assert sha256_file(folder / name) == digest, f"{name} differs from its manifest digest"
    assert {"queries.tsv", "corpus.jsonl", "qrels.txt", "candidates.trec", "rank_llm.jsonl"} <= on_disk
    run = current_run(out)
    assert run is not None
    return run


def staged(out: Path) -> list[str]:
    """Whatever lies under the export folder besides the export in place (staging folders, their locks)."""
    runs = out / RUNS
    kept = (current_run(out), f"{current_run(out)}.lock")  # the export in place and its lock
    return sorted(p.name for p in runs.iterdir() if p.name not in kept) \
        if runs.is_dir() else []


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export") / "pools"
    first = _export(out)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    complete(out)
    return out


def _interrupted(out: Path, tmp_path: Path, sig: int, point: str = f"export:{SPLIT}") -> subprocess.CompletedProcess:
    hold = Hold(tmp_path / "hold", point)
    proc = subprocess.Popen(_command(out), cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=_env(**hold.env()))
    reached = hold.reached(proc)
    if reached:
        assert (out / SPLIT / "manifest.json").is_file()  # held: the split is there, the previous or the new
        proc.send_signal(sig)
    out_text, err = proc.communicate(timeout=600)
    assert reached, f"the export never reached the hold:\n{out_text[-2000:]}\n{err[-3000:]}"
    return subprocess.CompletedProcess(proc.args, proc.returncode, out_text, err)


def test_sigkill_mid_replace_keeps_the_previous_export_and_the_next_export_cleans_up(exported: Path,
                                                                                      tmp_path: Path) -> None:
    before = complete(exported)
    killed = _interrupted(exported, tmp_path, signal.SIGKILL)
    assert killed.returncode == -signal.SIGKILL
    assert complete(exported) == before  # the previous export, whole
    after = _export(exported)
    assert after.returncode == 0, after.stderr[-3000:]
    assert complete(exported) != before
    assert staged(exported) == [], "a staging folder was left behind"
    assert not [p for p in exported.iterdir() if p.name.startswith(".staging")]


def test_sigint_mid_replace_keeps_the_previous_export_and_leaves_nothing_staged(exported: Path,
                                                                                 tmp_path: Path) -> None:
    before = complete(exported)
    interrupted = _interrupted(exported, tmp_path, signal.SIGINT)
    assert interrupted.returncode == 130, interrupted.stderr[-3000:]
    assert "Traceback" not in interrupted.stderr, interrupted.stderr[-3000:]
    assert f"interrupted: nothing exported; {exported} keeps the previous export" in interrupted.stderr
    assert complete(exported) == before
    assert staged(exported) == [], "the interrupted export left its staging folder"


def test_an_export_of_another_split_keeps_the_splits_it_does_not_write(exported: Path) -> None:
    before = complete(exported)
    other = subprocess.run([sys.executable, "-m", "harness.export", "--out", str(exported), "--splits",
                            "confirmation", "--subset-pairs", "24", "--subset-seed", "0"], cwd=PROJECT_ROOT,
                           capture_output=True, text=True, env=_env(), timeout=1800)
    assert other.returncode == 0, other.stderr[-3000:]
    assert complete(exported) != before  # a new export in place, the test split carried into it unchanged
    assert (exported / "confirmation" / "manifest.json").is_file() and staged(exported) == []


@pytest.mark.parametrize("after", [False, True], ids=["before the commit", "after the commit"])
def test_the_interrupt_message_is_read_from_the_export_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                after: bool) -> None:
    """The same in one process, without pools: an interrupt raised just before or just after the rename of
    ``.current`` (the commit); the message is whatever the folder holds, on either side."""
    import harness.export as export
    import reports.transaction as transaction

    out = tmp_path / "pools"
    ev = SimpleNamespace(settings=SimpleNamespace(splits=(SPLIT,)))
    monkeypatch.setattr(export, "export_split", lambda ev, split, folder, depth: (folder / "manifest.json").touch())
    export.export(ev, out, export_id="previous")
    real = transaction._replace_link

    def interrupted(link: Path, target: str) -> None:
        if link.name == transaction.CURRENT and after:
            real(link, target)
        if link.name == transaction.CURRENT:
            raise KeyboardInterrupt
        real(link, target)

    monkeypatch.setattr(transaction, "_replace_link", interrupted)
    with pytest.raises(KeyboardInterrupt):
        export.export(ev, out, export_id="new")
    assert current_run(out) == ("new" if after else "previous") and (out / SPLIT / "manifest.json").is_file()
    assert export.interrupted_message(out, "new", [SPLIT]) == (
        f"interrupted after the export was committed: {out} holds the new export of {SPLIT}, whole" if after else
        f"interrupted: nothing exported; {out} keeps the previous export")
    assert staged(out) == []


@pytest.mark.parametrize("point", ["swap", "swapped"])
def test_sigint_on_either_side_of_the_commit_says_which_export_is_in_place(exported: Path, tmp_path: Path,
                                                                          point: str) -> None:
    """The probe: SIGINT just after the swap printed "nothing exported; ... keeps the previous export" while the new
    export was in place. Interrupted just before the rename of ``.current`` the previous export stays and the
    message says so; just after it the new one is in place, whole, and the message says that."""
    before = complete(exported)
    interrupted = _interrupted(exported, tmp_path, signal.SIGINT, point)
    assert interrupted.returncode == 130 and "Traceback" not in interrupted.stderr, interrupted.stderr[-3000:]
    now = complete(exported)
    if point == "swap":
        assert now == before
        assert f"interrupted: nothing exported; {exported} keeps the previous export" in interrupted.stderr
    else:
        assert now != before and "nothing exported" not in interrupted.stderr
        assert (f"interrupted after the export was committed: {exported} holds the new export of {SPLIT}, whole"
                in interrupted.stderr)
    assert staged(exported) == [], "the interrupted export left a run behind"


@pytest.mark.parametrize("point", ["swap", "swapped"])
def test_sigkill_mid_swap_leaves_the_previous_export_or_the_new_one_whole(exported: Path, tmp_path: Path,
                                                                         point: str) -> None:
    """Killed inside the commit: just before the rename of ``.current`` the previous export is in place, just
    after it the new one; either is whole (every file matches its manifest), never a mix or a missing split."""
    before = complete(exported)
    killed = _interrupted(exported, tmp_path, signal.SIGKILL, point)
    assert killed.returncode == -signal.SIGKILL
    now = complete(exported)
    assert (now == before) if point == "swap" else (now != before)
    after = _export(exported)
    assert after.returncode == 0, after.stderr[-3000:]
    assert complete(exported) not in (before, now)
    assert staged(exported) == [], "the killed export's run was left behind"
