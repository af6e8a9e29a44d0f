"""The pytest report plugin: specs hand it rows, it writes the paper's tables at session end.

Rows travel on ``item.user_properties`` so they survive pytest-xdist (workers
serialize them back to the controller); only the controller writes files, and
rows are sorted by declared keys so a parallel run writes the same files as a
serial one.
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from reports.tables import TABLES

REPORT_KEY = "nevir-report"

#: Presentation order of rankers; unknown names follow alphabetically.
RANKER_ORDER = ("fusion", "e0", "bg8", "ce", "fusion_sample", "grader", "grader_e0")


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return None if math.isnan(float(value)) else float(value)
    if isinstance(value, (np.bool_,)):
        return bool(value)
    if isinstance(value, Path):
        return str(value)
    return value


class ReportRecorder:
    """What a spec uses to hand a row to the report (the ``report`` fixture)."""

    def __init__(self, node: pytest.Item) -> None:
        self._node = node

    def add(self, table: str, split: str, row: dict[str, Any]) -> None:
        if table not in TABLES:
            raise KeyError(f"unknown report table {table!r}; known: {sorted(TABLES)}")
        missing = [k for k in TABLES[table][1] if k not in row]
        if missing:
            raise KeyError(f"row for {table} lacks identifying columns {missing}")
        self._node.user_properties.append((REPORT_KEY, {"table": table, "split": split, "row": _jsonable(row)}))


@pytest.fixture
def report(request: pytest.FixtureRequest) -> ReportRecorder:
    """Hand rows to the session report (survives pytest-xdist)."""
    return ReportRecorder(request.node)


def _sort_key(table: str, row: dict[str, Any]) -> tuple:
    keys = TABLES[table][1]
    if table in ("table2", "table3"):
        name = str(row[keys[0]])
        return (RANKER_ORDER.index(name) if name in RANKER_ORDER else len(RANKER_ORDER), name)
    return tuple(str(row[k]) for k in keys)


class ReportPlugin:
    """Collects rows on the controller and writes every table per split at session end."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.rows: dict[tuple[str, str], dict[tuple, dict[str, Any]]] = {}

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Forget the previous run's stage timings so the manifest describes this run only."""
        import shutil

        results_dir = Path(self.config.getoption("results_dir"))
        for split in self.config.getoption("splits").split(","):
            shutil.rmtree(results_dir / split.strip() / "stages", ignore_errors=True)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for key, payload in report.user_properties:
            if key != REPORT_KEY:
                continue
            table, split, row = payload["table"], payload["split"], payload["row"]
            ident = tuple(str(row[k]) for k in TABLES[table][1])
            self.rows.setdefault((split, table), {})[ident] = row

    def frames(self) -> Iterator[tuple[str, str, pd.DataFrame]]:
        for (split, table), rows in sorted(self.rows.items()):
            ordered = sorted(rows.values(), key=lambda r: _sort_key(table, r))
            yield split, table, pd.DataFrame(ordered)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if not self.rows:
            return
        from reports.writer import write_split_report

        results_dir = Path(self.config.getoption("results_dir"))
        by_split: dict[str, dict[str, pd.DataFrame]] = {}
        for split, table, frame in self.frames():
            by_split.setdefault(split, {})[table] = frame
        for split, tables in by_split.items():
            write_split_report(results_dir / split, split, tables)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.rows:
            return
        from reports.writer import terminal_tables

        terminalreporter.section("Preference Is Not Position: report")
        for split, table, frame in self.frames():
            if table == "manifest":
                continue
            terminalreporter.write_line(f"\n[{split}] {TABLES[table][0]}")
            terminalreporter.write_line(terminal_tables(table, frame))
        results_dir = Path(self.config.getoption("results_dir"))
        terminalreporter.write_line(f"\nresults written under {results_dir}")


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return  # xdist worker: rows go to the controller through the reports
    config.pluginmanager.register(ReportPlugin(config), "nevir-report-plugin")
