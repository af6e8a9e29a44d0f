"""The report plugin: rows in declared order whatever order they were computed in; under pytest-xdist nothing is
published, and the run says why."""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from fixtures.settings import PROJECT_ROOT

pytest_plugins = ["pytester"]

SPEC = '''
import pytest

from reports.measures import TABLE2_ROW_COLUMNS

ORDER = {"fusion": 10, "e0": 20, "bg8": 30, "ce": 40}


@pytest.mark.parametrize("ranker", ["ce", "fusion", "e0", "bg8", "zeta"])
def test_row(report, ranker):
    row = dict.fromkeys(TABLE2_ROW_COLUMNS, float("nan"))
    row.update({"ranker": ranker, "n": 10, "strict": len(ranker), "strict_pct": 10.0 * len(ranker), "paired": 1,
                "paired_n": 5, "paired_pct": 20.0, "mrr": 1.0 / len(ranker), "pref_at_1": 10.0, "ties": 0,
                "fallback": 0, "delta_pts": 1.0, "delta_lo": 0.5, "delta_hi": 1.5, "mean_rank_pos": 2.0,
                "mean_rank_neg": 3.0})
    report.add("table2", "test", row, order=ORDER.get(ranker))

def test_claim(report):
    report.add("claims", "test", {"claim": "h_demo", "status": "holds", "expected": "> 0", "measured": "+1 pts"})

def test_manifest(report):
    report.entry("test", "profile", {"name": "demo", "rankers": {r: {} for r in ORDER}})

def test_table1(report):
    report.add("table1", "test", {"population": "test", "planned": 10})

def test_unknown_table(report):
    with pytest.raises(KeyError, match="unknown report table"):
        report.add("table9", "test", {"x": 1})
'''

CONFTEST = '''
from pathlib import Path

pytest_plugins = ["reports.plugin", "tests.support.fake_engine"]

def pytest_addoption(parser):
    parser.addoption("--results-dir")
    parser.addoption("--splits", default="test")

def pytest_configure(config):
    from fixtures.settings import Settings
    from reports.plugin import SETTINGS

    config.stash[SETTINGS] = Settings(results_dir=Path(config.getoption("results_dir")))
'''


def _run(pytester: pytest.Pytester, out: Path, *args: str) -> pd.DataFrame:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_spec=SPEC)
    result = pytester.runpytest_subprocess(f"--results-dir={out}", "-p", "no:cacheprovider", *args)
    result.assert_outcomes(passed=9)
    assert "Preference Is Not Position: report" in result.stdout.str()
    return pd.read_csv(out / "test" / "table2.csv")


def test_rows_are_published_in_declared_order_whatever_order_they_were_recorded_in(
        pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(PROJECT_ROOT))
    forward = _run(pytester, tmp_path / "forward")
    backward = _run(pytester, tmp_path / "backward", "-p", "tests.support.reverse_order")
    assert list(forward["ranker"]) == ["fusion", "e0", "bg8", "ce", "zeta"]  # declared order, unknown names last
    pd.testing.assert_frame_equal(forward, backward)
    for name in ("table2.json", "table2.tex", "report.md", "claims.csv", "figure1.png", "figure1.csv"):
        assert (tmp_path / "backward" / "test" / name).is_file(), name

    def without_run_id(path: Path) -> str:  # the run id carries the publication time
        return re.sub(r"run `[^`]*`", "run", path.read_text())

    assert without_run_id(tmp_path / "forward" / "test" / "report.md") == \
        without_run_id(tmp_path / "backward" / "test" / "report.md")


def test_a_run_under_xdist_publishes_nothing_and_says_why(pytester: pytest.Pytester, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(PROJECT_ROOT))
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_spec=SPEC)
    result = pytester.runpytest_subprocess(f"--results-dir={tmp_path / 'out'}", "-p", "no:cacheprovider", "-n", "2")
    result.assert_outcomes(passed=9)
    assert "not published: pytest-xdist (-n)" in result.stdout.str()
    assert not (tmp_path / "out" / "test").exists()


COMPARING_CONFTEST = CONFTEST.replace('''    parser.addoption("--splits", default="test")''', '''    parser.addoption("--splits", default="test")
    parser.addoption("--compare-to", default=None)''').replace(
    '''Settings(results_dir=Path(config.getoption("results_dir")))''',
    '''Settings(results_dir=Path(config.getoption("results_dir")),
                                      compare_run=config.getoption("compare_to"))''')


def test_a_partial_run_is_kept_in_the_history_marked_and_a_later_run_compares_with_it(
        pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    monkeypatch.setenv("PYTHONPATH", str(PROJECT_ROOT))
    pytester.makeconftest(COMPARING_CONFTEST)
    pytester.makepyfile(test_spec=SPEC)
    results = tmp_path / "results"
    partial = pytester.runpytest_subprocess(f"--results-dir={results}", "-p", "no:cacheprovider", "-k", "not bg8")
    partial.assert_outcomes(passed=8, deselected=1)
    [ident] = [p.name for p in (results / ".history").iterdir()]
    assert "-demo-run-partial-" in ident  # commit, profile, scope, then the mark
    saved = json.loads((results / ".history" / ident / "test" / "manifest.json").read_text())
    assert saved["partial"] == ["1 part(s) of the run not computed: test_spec.py::test_row[bg8]"]
    assert f"kept in the history as {ident}" in partial.stdout.str()
    assert not (results / "test").exists() and (results / "partial" / "test" / "table2.csv").is_file()

    complete = pytester.runpytest_subprocess(f"--results-dir={results}", "-p", "no:cacheprovider",
                                             f"--compare-to={ident}")
    complete.assert_outcomes(passed=9)
    out = complete.stdout.str()
    assert ("the saved run is partial (1 part(s) of the run not computed: test_spec.py::test_row[bg8]): the rankers "
            "both runs hold are compared") in out
    assert "rankers in this run only, not compared: bg8" in out
    table = pd.read_csv(results / "test" / "comparison.csv")
    sides = table.drop_duplicates("ranker").set_index("ranker")["side"].to_dict()
    assert sides == {"fusion": "both", "e0": "both", "bg8": "this run only", "ce": "both", "zeta": "both"}
    compared = table[(table["side"] == "both") & (table["measure"] == "strict")]
    assert (compared["delta"] == 0).all() and len(compared) == 4
    later = [p.name for p in (results / ".history").iterdir() if p.name != ident]
    assert len(later) == 1 and "partial" not in later[0]
