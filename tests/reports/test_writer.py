"""Publishing a run: every split swapped in together, or the previous complete results left untouched."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from fixtures.artifacts import seal, sha256_file
from fixtures.settings import PROJECT_ROOT
from reports import writer
from reports.measures import TABLE2_ROW_COLUMNS
from reports.record import Artifact, SplitRecord
from reports.render import table2_latex, tex_escape, unavailable_lines
from reports.transaction import RUNS, StagedRun
from reports.writer import PublishError, PublishInterrupted, current_run, publish

SPLITS = ("confirmation", "test")


def table2(strict: int, name: str = "fusion") -> pd.DataFrame:
    row = dict.fromkeys(TABLE2_ROW_COLUMNS, float("nan"))
    row.update({"ranker": name, "n": 10, "strict": strict, "strict_pct": 10.0 * strict, "paired_pct": 20.0,
                "mrr": 0.5, "pref_at_1": 30.0, "ties": 1, "fallback": 0, "mean_rank_pos": 2.0, "mean_rank_neg": 3.0})
    return pd.DataFrame([row])


def record(strict: int, split: str = "test", artifacts: tuple[Artifact, ...] = (), **tables: pd.DataFrame
           ) -> SplitRecord:
    return SplitRecord(split, {"table2": table2(strict), **tables},
                       {"code_commit": "abc", "profile": {"name": "embedded"}}, artifacts)


def run(root: Path, ident: str, strict: int, **options) -> dict[str, Path]:
    return publish(root, ident, {s: record(strict, s) for s in SPLITS}, **options)


def published(root: Path) -> dict[str, tuple[str, list[int]]]:
    """Per split: the run id in its manifest and its Table II strict counts."""
    return {s: (json.loads((root / s / "manifest.json").read_text())["run_id"],
                pd.read_csv(root / s / "table2.csv")["strict"].tolist()) for s in SPLITS}


def test_every_split_is_swapped_in_together(tmp_path: Path) -> None:
    first = run(tmp_path, "r1", 3)
    assert published(tmp_path) == {s: ("r1", [3]) for s in SPLITS}
    assert all(p.is_symlink() for p in first.values())
    (first["test"] / "stray.txt").write_text("a user's file put into the published split")
    kept: list[str] = []
    run(tmp_path, "r2", 4, kept=kept)
    assert published(tmp_path) == {s: ("r2", [4]) for s in SPLITS}
    assert not (tmp_path / "test" / "stray.txt").exists()  # nothing of the old run shows beside the new
    assert current_run(tmp_path) == "r2"
    # the old run's own files are gone; the file the suite did not write is kept where it was, and named
    assert sorted(p.relative_to(tmp_path / RUNS / "r1").as_posix() for p in (tmp_path / RUNS / "r1").rglob("*")) == \
        ["test", "test/stray.txt"]
    assert kept == [f"{RUNS}/r1/test/stray.txt"]


def test_a_run_with_fewer_splits_leaves_no_split_of_the_previous_run(tmp_path: Path) -> None:
    run(tmp_path, "r1", 3)
    publish(tmp_path, "r2", {"test": record(5)})
    assert not (tmp_path / "confirmation").exists() and not (tmp_path / "confirmation").is_symlink()
    assert pd.read_csv(tmp_path / "test" / "table2.csv")["strict"].tolist() == [5]


def test_a_failure_while_staging_any_split_keeps_every_previous_split(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    run(tmp_path, "r1", 3)
    before = {s: (tmp_path / s / "table2.csv").read_bytes() for s in SPLITS}
    calls = []

    def broken_on_second_split(out, tables, cache=None):
        calls.append(out)
        if len(calls) == 2:
            raise RuntimeError("deliberate failure in the last split")
        return []

    monkeypatch.setattr(writer, "write_figures", broken_on_second_split)
    with pytest.raises(PublishError, match="deliberate failure.*keeps the previous complete results"):
        run(tmp_path, "r2", 9)
    assert {s: (tmp_path / s / "table2.csv").read_bytes() for s in SPLITS} == before
    assert current_run(tmp_path) == "r1" and not (tmp_path / RUNS / "r2").exists()


def test_an_interrupted_session_publishes_nothing(tmp_path: Path) -> None:
    run(tmp_path, "r1", 3)
    with pytest.raises(PublishError, match="interrupted"):
        run(tmp_path, "r2", 1, exitstatus=writer.INTERRUPTED)
    assert published(tmp_path) == {s: ("r1", [3]) for s in SPLITS}


def test_a_signal_between_splits_abandons_the_staged_run(tmp_path: Path, monkeypatch) -> None:
    run(tmp_path, "r1", 3)
    received: list[int] = []
    write = writer._write

    def write_then_signal(out, *args) -> None:  # SIGINT arrives while the first split is written
        write(out, *args)
        received.append(signal.SIGINT)
    monkeypatch.setattr(writer, "_write", write_then_signal)
    with pytest.raises(PublishInterrupted, match="keeps the previous complete results"):
        publish(tmp_path, "r2", {s: record(8, s) for s in SPLITS}, interrupts=received)
    assert received == [signal.SIGINT]
    assert published(tmp_path) == {s: ("r1", [3]) for s in SPLITS}
    assert not (tmp_path / RUNS / "r2").exists()


def test_sigkill_during_staging_leaves_the_previous_run_and_the_next_run_cleans_up(tmp_path: Path) -> None:
    run(tmp_path, "r1", 3)
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(PROJECT_ROOT)!r})
        from reports import writer
        from tests.reports.test_writer import run
        def slow(out, *args):
            if out.parent.name == "r2" and out.name == "test":
                print("staging the last split", flush=True)
                time.sleep(60)
            return []
        writer.write_figures = slow
        run(writer.Path({str(tmp_path)!r}), "r2", 7)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=PROJECT_ROOT)
    assert proc.stdout.readline().strip() == "staging the last split"  # confirmation staged, test half written
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert published(tmp_path) == {s: ("r1", [3]) for s in SPLITS}
    assert (tmp_path / RUNS / "r2").is_dir()  # left aside, never in place of the results
    run(tmp_path, "r3", 8)  # the next run removes it and publishes normally
    assert published(tmp_path) == {s: ("r3", [8]) for s in SPLITS}
    assert sorted(p.name for p in (tmp_path / RUNS).iterdir()) == ["r3", "r3.lock"]


def test_a_run_being_staged_by_a_live_process_is_not_removed(tmp_path: Path) -> None:
    run(tmp_path, "r1", 3)
    staged = StagedRun(tmp_path, "other", None)  # recorded in the ledger, its lock held as a live stager holds it
    (staged.folder / "test").mkdir()
    run(tmp_path, "r2", 4)
    assert staged.folder.is_dir()
    staged._own.release()  # its owner is gone now (killed: it never closed)
    run(tmp_path, "r3", 5)
    assert not staged.folder.exists()


def test_results_of_the_older_layout_are_replaced_like_a_run(tmp_path: Path) -> None:
    """Split folders of the layout before transactions are replaced by the run's links; what they held was not
    written under this ledger, so it is kept (moved under ``.runs/``) and named, never deleted."""
    for split in SPLITS:
        (tmp_path / split).mkdir()
        (tmp_path / split / "table2.csv").write_text("ranker,strict\nold,1\n")
    kept: list[str] = []
    run(tmp_path, "r1", 3, kept=kept)
    assert published(tmp_path) == {s: ("r1", [3]) for s in SPLITS}
    [legacy] = [p for p in (tmp_path / RUNS).iterdir() if p.is_dir() and p.name != "r1"]
    assert all((legacy / s / "table2.csv").read_text() == "ranker,strict\nold,1\n" for s in SPLITS)
    assert kept == [f"{RUNS}/{legacy.name}/"]


def _sealed(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    seal(path)
    return path


def test_published_files_are_independent_copies_listed_with_their_digests(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    trec = _sealed(cache / "run-fusion.trec", "q1 Q0 p1 1 2 fusion\nq1 Q0 p2 2 1 fusion\n")
    pool = _sealed(cache / "pool.parquet", "not really parquet, copied as bytes")
    t = record(3, artifacts=(Artifact("run", trec, "fusion"), Artifact("pool", pool)))
    out = publish(tmp_path / "results", "r1", {"test": t})["test"]
    for copy, source in ((out / "runs" / "fusion.trec", trec), (out / "pool.parquet", pool)):
        assert copy.stat().st_nlink == 1 and copy.stat().st_ino != source.stat().st_ino
    with open(out / "runs" / "fusion.trec", "a") as fh:
        fh.write("q1 Q0 p3 3 0 fusion\n")
    assert trec.read_text().count("\n") == 2  # editing a published file leaves the cache as it was
    manifest = json.loads((out / "manifest.json").read_text())
    digests = {k: v for k, v in manifest["files"].items() if k != "runs/fusion.trec"}
    assert {"table2.csv", "table2.tex", "report.md", "pool.parquet"} <= set(digests)
    assert all(sha256_file(out / name) == digest for name, digest in digests.items())
    assert manifest["files"]["runs/fusion.trec"] != sha256_file(out / "runs" / "fusion.trec")  # the edit shows


def test_a_cached_file_altered_after_it_was_sealed_is_refused(tmp_path: Path) -> None:
    trec = _sealed(tmp_path / "cache" / "run-fusion.trec", "q1 Q0 p1 1 1 fusion\n")
    run(tmp_path / "results", "r1", 3)
    with open(trec, "a") as fh:
        fh.write("q9 Q0 p9 1 1 fusion\n")
    t = record(4, artifacts=(Artifact("run", trec, "fusion"),))
    with pytest.raises(PublishError, match=r"run-fusion\.trec.*altered or truncated"):
        publish(tmp_path / "results", "r2", {"confirmation": record(4, "confirmation"), "test": t})
    assert published(tmp_path / "results") == {s: ("r1", [3]) for s in SPLITS}


def test_table2_latex_is_booktabs_with_n_intervals_and_caption() -> None:
    frame = table2(3).assign(strict_pct_lo=20.0, strict_pct_hi=40.0, delta_pts=1.0, delta_lo=-0.5,
                                       delta_hi=2.5)
    tex = table2_latex(frame, "test", "embedded", "abc123")
    assert r"\toprule" in tex and r"\midrule" in tex and r"\bottomrule" in tex
    assert "strict\\_pct" not in tex and "Strict (\\%)" in tex
    assert "fusion & 10 & 30.00 [20.00, 40.00]" in tex and "1.00 [-0.50, 2.50]" in tex
    assert "NevIR test (profile embedded, commit abc123)" in tex


def test_tex_escape_covers_every_special_character() -> None:
    assert tex_escape("a&b%c#d$e_{}~^\\") == \
        r"a\&b\%c\#d\$e\_\{\}\textasciitilde{}\textasciicircum{}\textbackslash{}"


def test_unavailable_judgments_are_published_by_cause_with_capped_replies(tmp_path: Path) -> None:
    rows = [{"ranker": "oa", "scope": "window", "inputs": 80, "issue": "unavailable", "cause": "ConnectError to h:1",
             "count": 12},
            {"ranker": "oa", "scope": "window", "inputs": 80, "issue": "unavailable", "cause": "HTTP 500 from h:1",
             "count": 4},
            {"ranker": "oa", "scope": "window", "inputs": 80, "issue": "capped",
             "cause": "over 65,536 characters stored cut", "count": 3},
            {"ranker": "rr", "scope": "pair", "inputs": 8, "issue": "capped",
             "cause": "over 100 characters stored cut", "count": 8}]
    frame = pd.DataFrame(rows)
    assert unavailable_lines(frame) == [
        "oa (window): 16 of 80 judgments unavailable — 12 ConnectError to h:1; 4 HTTP 500 from h:1; "
        "3 replies over 65,536 characters stored cut",
        "rr (pair): 8 replies over 100 characters stored cut"]
    [path] = publish(tmp_path, "r1", {"test": record(3, unavailable=frame)}).values()
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["unavailable"]["oa"]["window"] == {
        "inputs": 80, "unavailable": 16, "causes": {"ConnectError to h:1": 12, "HTTP 500 from h:1": 4},
        "replies_capped": 3}
    assert manifest["unavailable"]["rr"]["pair"]["unavailable"] == 0
    report = (path / "report.md").read_text()
    assert "- oa (window): 16 of 80 judgments unavailable — 12 ConnectError to h:1" in report
    assert pd.read_csv(path / "unavailable.csv")["count"].sum() == 27
    [clean] = publish(tmp_path, "r2", {"test": record(3)}).values()
    assert json.loads((clean / "manifest.json").read_text())["unavailable"] == {}
    assert "Unavailable judgments" not in (clean / "report.md").read_text()
