"""pytest's -ra summary says each skip reason once: a reason that recurs in several spec files and lines (a ranker
that does not apply to the dataset skips every spec computing it) is folded to the folder holding them."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from reports.terminal import fold_skips

pytest_plugins = ["pytester"]

REASON = "e0: not applicable: dataset 'mine' has no train and development split(s)"

CONFTEST = '''
import pytest

from reports.terminal import fold_skips


@pytest.fixture
def part():
    pytest.skip("''' + REASON + '''")  # a part's outcome, skipped with its reason (as the suite's conftest does)


@pytest.hookimpl(tryfirst=True)
def pytest_terminal_summary(terminalreporter):
    fold_skips(terminalreporter.stats.get("skipped", ()), terminalreporter.startpath)
'''

MARKED = '''
import pytest


@pytest.mark.parametrize("ranker", [pytest.param("e0", marks=pytest.mark.skip(reason="''' + REASON + '''"))])
def test_row(ranker):
    pass


@pytest.mark.skip(reason="''' + REASON + '''")
def test_claim():
    pass


@pytest.mark.skip(reason="this profile's pool is not the frozen one")
def test_frozen():
    pass
'''

FIXTURE = '''
def test_cost(part):
    pass


def test_bias(part):
    pass
'''


def test_a_reason_skipped_in_several_spec_files_is_one_summary_line_with_its_count(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    specs = pytester.mkpydir("specs")
    (specs / "test_table2.py").write_text(MARKED, encoding="utf-8")
    (specs / "test_h3.py").write_text(FIXTURE, encoding="utf-8")
    result = pytester.runpytest("-ra", "-p", "no:cacheprovider")
    result.assert_outcomes(skipped=5)
    lines = [line for line in result.outlines if line.startswith("SKIPPED")]
    assert lines == [f"SKIPPED [4] specs: {REASON}",
                     "SKIPPED [1] specs/test_table2.py:15: this profile's pool is not the frozen one"], lines


def _skip(path: str, line: int, reason: str) -> SimpleNamespace:
    return SimpleNamespace(longrepr=(path, line, reason))


def test_folding_moves_only_recurring_reasons_and_keeps_each_reason_whole(tmp_path: Path) -> None:
    once = _skip("specs/test_a.py", 3, "Skipped: alone")
    twice = [_skip("specs/test_a.py", 5, f"Skipped: {REASON}"), _skip("specs/sub/test_b.py", 9, REASON)]
    same_line = [_skip("specs/test_c.py", 2, "e0: r"), _skip("specs/test_c.py", 2, "e0: r")]
    failed = SimpleNamespace(longrepr="a traceback")  # not a skip: no (path, line, reason)
    assert fold_skips([once, *twice, *same_line, failed], tmp_path) == 2
    assert once.longrepr == ("specs/test_a.py", 3, "Skipped: alone")
    assert [r.longrepr for r in twice] == [(str(tmp_path / "specs"), None, REASON)] * 2
    assert [r.longrepr for r in same_line] == [("specs/test_c.py", 2, "e0: r")] * 2  # pytest folds these itself
    assert failed.longrepr == "a traceback"


class _Terminal:
    """What write_summary uses of pytest's terminal reporter: its stats, start path and lines."""

    def __init__(self, start: Path, skipped: list[SimpleNamespace]) -> None:
        self.stats, self.startpath, self.lines = {"skipped": skipped}, start, []

    def section(self, title: str) -> None:
        self.lines.append(title)

    def write_line(self, line: str, **_: bool) -> None:
        self.lines.append(line)


def test_the_run_summary_folds_the_sessions_skips_before_pytests_short_summary(tmp_path: Path) -> None:
    from reports.record import SessionEnd
    from reports.terminal import write_summary

    skipped = [_skip("specs/test_a.py", 5, REASON), _skip("specs/test_b.py", 9, REASON)]
    terminal = _Terminal(tmp_path, skipped)
    write_summary(terminal, [], {}, SessionEnd(), tmp_path / "results", None)
    assert {r.longrepr for r in skipped} == {(str(tmp_path / "specs"), None, REASON)}
    assert terminal.lines[0] == "Preference Is Not Position: report"


def test_report_md_lists_each_outcome_and_reason_once_with_every_part_it_cost() -> None:
    from reports.record import NotEvaluated
    from reports.render import not_evaluated_lines

    entries = [NotEvaluated("table2_row[test-e0]", "skipped", REASON),
               NotEvaluated("table1[test-train]", "skipped", "dataset 'mine' has no train split"),
               NotEvaluated("comparison[test-h1_e0_mrr_lt_fusion]", "skipped", REASON),
               NotEvaluated("table2_row[test-ce]", "failed", REASON)]
    assert not_evaluated_lines(entries) == [
        "`table2_row[test-e0]`, `comparison[test-h1_e0_mrr_lt_fusion]` skipped: e0: not applicable: dataset 'mine' "
        "has no train and development split(s)",
        "`table1[test-train]` skipped: dataset 'mine' has no train split",
        "`table2_row[test-ce]` failed: e0: not applicable: dataset 'mine' has no train and development split(s)"]
