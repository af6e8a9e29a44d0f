"""Publishing a split: all files swapped in whole, or the previous complete results left untouched."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from fixtures.settings import PROJECT_ROOT
from reports import writer
from reports.measures import TABLE2_ROW_COLUMNS
from reports.writer import PublishError, publish, table2_latex


def tables(strict: int) -> dict[str, pd.DataFrame]:
    row = dict.fromkeys(TABLE2_ROW_COLUMNS, float("nan"))
    row.update({"ranker": "fusion", "n": 10, "strict": strict, "strict_pct": 10.0 * strict, "paired_pct": 20.0,
                "mrr": 0.5, "pref_at_1": 30.0, "ties": 1, "fallback": 0, "mean_rank_pos": 2.0, "mean_rank_neg": 3.0})
    return {"table2": pd.DataFrame([row]),
            "manifest": pd.DataFrame([{"key": "code_commit", "value": "abc"},
                                      {"key": "profile", "value": {"name": "embedded"}}])}


def test_publish_replaces_the_split_whole(tmp_path: Path) -> None:
    first = publish(tmp_path, "test", tables(3), {"run_id": "r1", "exitstatus": 0})
    assert pd.read_csv(first / "table2.csv")["strict"].tolist() == [3]
    (first / "stray.txt").write_text("left by an older version")
    publish(tmp_path, "test", tables(4), {"run_id": "r2", "exitstatus": 0})
    assert pd.read_csv(tmp_path / "test" / "table2.csv")["strict"].tolist() == [4]
    assert not (tmp_path / "test" / "stray.txt").exists()  # nothing of the old run survives beside the new
    assert sorted(p.name for p in tmp_path.iterdir()) == ["test"]  # no staging or previous folder left


def test_a_failure_while_writing_keeps_the_previous_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    publish(tmp_path, "test", tables(3), {"exitstatus": 0})
    before = {p.name: p.read_bytes() for p in (tmp_path / "test").iterdir() if p.is_file()}

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(writer, "write_figures", broken)
    with pytest.raises(PublishError, match="keeps the previous results"):
        publish(tmp_path, "test", tables(9), {"exitstatus": 0})
    after = {p.name: p.read_bytes() for p in (tmp_path / "test").iterdir() if p.is_file()}
    assert after == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["test"]


def test_an_interrupted_session_publishes_nothing(tmp_path: Path) -> None:
    publish(tmp_path, "test", tables(3), {"exitstatus": 0})
    with pytest.raises(PublishError, match="interrupted"):
        publish(tmp_path, "test", tables(1), {"exitstatus": writer.INTERRUPTED})
    assert pd.read_csv(tmp_path / "test" / "table2.csv")["strict"].tolist() == [3]


def test_sigkill_during_publication_leaves_the_previous_results(tmp_path: Path) -> None:
    """A process killed mid-write (the old code left a 0-byte directions.csv) leaves old results intact."""
    publish(tmp_path, "test", tables(3), {"exitstatus": 0})
    before = (tmp_path / "test" / "table2.csv").read_bytes()
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(PROJECT_ROOT)!r})
        import pandas as pd
        from reports import writer
        from tests.reports.test_writer import tables
        real = writer.write_figures
        def slow(*args):
            print("writing", flush=True)
            time.sleep(60)
            return real(*args)
        writer.write_figures = slow
        writer.publish({str(tmp_path)!r}, "test", tables(7), {{"exitstatus": 0}})
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=PROJECT_ROOT)
    assert proc.stdout.readline().strip() == "writing"  # staging is half written now
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert (tmp_path / "test" / "table2.csv").read_bytes() == before
    staging = [p.name for p in tmp_path.iterdir() if p.name.startswith(".staging")]
    assert staging  # the half-written staging folder is left aside, never in place of the results
    publish(tmp_path, "test", tables(8), {"exitstatus": 0})  # the next run cleans up and publishes normally
    assert pd.read_csv(tmp_path / "test" / "table2.csv")["strict"].tolist() == [8]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["test"]


def test_a_swap_cut_short_is_restored_by_the_next_run(tmp_path: Path) -> None:
    """Killed between moving the old results aside and moving the new ones in: the old come back."""
    publish(tmp_path, "test", tables(3), {"exitstatus": 0})
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / "test").rename(tmp_path / f".previous-test-{int(dead.stdout)}")
    writer.recover(tmp_path, "test")
    assert pd.read_csv(tmp_path / "test" / "table2.csv")["strict"].tolist() == [3]


def test_table2_latex_is_booktabs_with_n_intervals_and_caption() -> None:
    frame = tables(3)["table2"].assign(strict_pct_lo=20.0, strict_pct_hi=40.0, delta_pts=1.0, delta_lo=-0.5,
                                       delta_hi=2.5)
    tex = table2_latex(frame, "test", "embedded", "abc123")
    assert r"\toprule" in tex and r"\midrule" in tex and r"\bottomrule" in tex
    assert "strict\\_pct" not in tex and "Strict (\\%)" in tex
    assert "fusion & 10 & 30.00 [20.00, 40.00]" in tex and "1.00 [-0.50, 2.50]" in tex
    assert "NevIR test (profile embedded, commit abc123)" in tex
