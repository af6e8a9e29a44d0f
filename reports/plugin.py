"""The pytest report plugin: specs hand it rows; at session end it publishes the results in one step.

Rows travel on ``item.user_properties`` so they survive pytest-xdist (workers serialize
them back to the controller); only the controller writes, once, in
``pytest_sessionfinish`` (``reports.writer.publish``), and rows are sorted by declared keys
so a parallel run writes the same files as a serial one. This module is pytest glue only:
tables live in ``reports.tables``, writing in ``reports.writer``, run history in
``reports.history``.
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from fixtures.settings import default_cache_dir
from reports.tables import TABLES

REPORT_KEY = "nevir-report"


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return None if math.isnan(float(value)) else float(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if value is pd.NA:
        return None
    if isinstance(value, Path):
        return str(value)
    return value


class ReportRecorder:
    """What a spec uses to hand a row to the report (the ``report`` fixture)."""

    def __init__(self, node: pytest.Item) -> None:
        self._node = node

    def add(self, table: str, split: str, row: dict[str, Any], order: float | None = None) -> None:
        """Queue a row; ``order`` places it within its table (declared ranker order), else identifying keys do."""
        if table not in TABLES:
            raise KeyError(f"unknown report table {table!r}; known: {sorted(TABLES)}")
        missing = [k for k in TABLES[table][1] if k not in row]
        if missing:
            raise KeyError(f"row for {table} lacks identifying columns {missing}")
        self._node.user_properties.append(
            (REPORT_KEY, {"table": table, "split": split, "row": _jsonable(row), "order": order}))


@pytest.fixture
def report(request: pytest.FixtureRequest) -> ReportRecorder:
    """Hand rows to the session report (survives pytest-xdist)."""
    return ReportRecorder(request.node)


class ReportPlugin:
    """Collects rows on the controller and publishes every split's results at session end."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.rows: dict[tuple[str, str], dict[tuple, tuple[float, dict[str, Any]]]] = {}
        self.published: dict[str, Path] = {}
        self.comparison: dict[str, pd.DataFrame] = {}
        self.failed: list[str] = []
        self.notices: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for key, payload in report.user_properties:
            if key != REPORT_KEY:
                continue
            table, split, row = payload["table"], payload["split"], payload["row"]
            ident = tuple(str(row[k]) for k in TABLES[table][1])
            order = payload.get("order")
            self.rows.setdefault((split, table), {})[ident] = (math.inf if order is None else float(order), row)

    def frames(self) -> Iterator[tuple[str, str, pd.DataFrame]]:
        for (split, table), rows in sorted(self.rows.items()):
            keys = TABLES[table][1]
            ordered = sorted(rows.values(), key=lambda r: (r[0], tuple(str(r[1][k]) for k in keys)))
            frame = pd.DataFrame([r for _, r in ordered])
            yield split, table, frame

    def tables(self) -> dict[str, dict[str, pd.DataFrame]]:
        by_split: dict[str, dict[str, pd.DataFrame]] = {}
        for split, table, frame in self.frames():
            by_split.setdefault(split, {})[table] = frame
        return by_split

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not self.rows:
            return
        from reports.history import compare_runs, run_id, save_to_history  # pandas I/O only at session end
        from reports.writer import PublishError, publish  # heavy: matplotlib, only when publishing

        results_dir = Path(self.config.getoption("results_dir"))
        cache = self.config.getoption("cache_dir", None)
        context = {"exitstatus": int(exitstatus), "figure_cache": Path(cache or default_cache_dir()) / "figures"}
        ident = run_id(self.tables())
        for split, tables in self.tables().items():
            if "table2" not in tables:  # a benchmark-only or unrelated selection must not replace real results
                self.notices.append(f"{split}: no Table II row in this run (benchmarks or a partial selection); "
                                    f"{results_dir / split} is left as it was")
                continue
            try:
                self.published[split] = publish(results_dir, split, tables, {**context, "run_id": ident})
            except PublishError as exc:
                self.failed.append(str(exc))
                continue
            save_to_history(results_dir, ident, split, self.published[split])
            other = self.config.getoption("compare_to", None)
            if other:
                self.comparison[split] = compare_runs(results_dir, other, split, tables.get("table2"))
        if self.failed:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.rows:
            return
        from reports.writer import terminal_tables  # heavy: matplotlib (figures), only for the summary

        terminalreporter.section("Preference Is Not Position: report")
        for split, table, frame in self.frames():
            if TABLES[table][2]:
                terminalreporter.write_line(f"\n[{split}] {TABLES[table][0]}")
                terminalreporter.write_line(terminal_tables(table, frame))
        for split, frame in self.comparison.items():
            terminalreporter.write_line(f"\n[{split}] Comparison with {self.config.getoption('compare_to', None)}")
            terminalreporter.write_line(terminal_tables("comparison", frame))
        for message in self.notices:
            terminalreporter.write_line(f"\nnot published: {message}")
        for message in self.failed:
            terminalreporter.write_line(f"\nRESULTS NOT PUBLISHED: {message}", red=True)
        for split, path in self.published.items():
            terminalreporter.write_line(f"\n[{split}] results written to {path}")


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return  # xdist worker: rows go to the controller through the reports
    config.pluginmanager.register(ReportPlugin(config), "nevir-report-plugin")
