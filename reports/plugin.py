"""The pytest report plugin: glue between a pytest session and the one run record it publishes at the end.

The plugin computes nothing and builds no record of its own. Whoever computes the session's run (the suite's
root ``conftest.py``, through ``harness.run.RunBuilder``: the same engine as ``evaluate()``) hands it over with
``provide_run``; at session end the plugin publishes that ``RunRecord`` once (``reports.writer.publish_run``) and
writes the terminal summary from it. Whether the run is complete is the record's own verdict
(``RunRecord.partial``): a run that is not complete is published whole under ``<results>/partial/`` and never
replaces a complete run's files (docs/protocol.md#publishing).

pytest-xdist: the record lives in the process that computes it, so a run under ``-n`` publishes
nothing and says so; the evaluation needs no ``-n`` (its judging is parallel in its backends).
"""
from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from fixtures.settings import Settings
from reports.record import SessionEnd
from reports.run_record import Check, RunRecord

#: The run's settings as ``harness.options`` read, checked and expanded them (the root conftest stores them).
SETTINGS = pytest.StashKey[Settings]()
#: The session's run: a callable giving its record at session end (None: nothing was computed).
RUN = pytest.StashKey[Callable[[], RunRecord | None]]()
#: The mark of a test that reads the session's run record (seen on its report under pytest-xdist).
RECORDS = "nevir_records"
#: Why a run under pytest-xdist publishes nothing.
XDIST = ("pytest-xdist (-n): each worker computes its own share of the run, so no process holds the whole record; "
         "run the specs without -n (the judging backends are parallel themselves)")


def provide_run(config: pytest.Config, source: Callable[[], RunRecord | None]) -> None:
    """Hand the session's run to the plugin as soon as it is asked for: ``source()`` gives its record at session end
    (None: asked for, but not computed, e.g. interrupted while computing)."""
    config.stash[RUN] = source


def enforce(checks: Iterable[Check]) -> None:
    """A part's checks as a spec's pytest outcome: every warning, then one failure naming every failed check, else an
    xfail (docs/statistics.md#claims)."""
    checks = tuple(checks)
    for check in checks:
        if check.action == "warn":
            warnings.warn(check.category(check.message), stacklevel=2)
    failed = [c.message for c in checks if c.action == "fail"]
    if failed:
        pytest.fail("; ".join(failed))
    for check in checks:
        if check.action == "xfail":
            pytest.xfail(check.message)


class ReportPlugin:
    """Publishes the session's run record at its end and writes its terminal summary."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.end = SessionEnd()
        self.run: RunRecord | None = None
        #: Under pytest-xdist: whether a worker ran a test that reads the run (its record stays there).
        self.recorded_elsewhere = False

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.recorded_elsewhere |= RECORDS in report.keywords and hasattr(report, "node")

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.recorded_elsewhere:
            self.end.notices.append(XDIST)
        source = self.config.stash.get(RUN, None)
        if source is None:
            return  # no spec asked for the run
        self.run = source() or RunRecord({})  # asked for but not computed (interrupted): the writer says so
        from reports.writer import deferred_signals, publish_run  # only when publishing

        settings = self.config.stash[SETTINGS]
        with deferred_signals() as received:
            publish_run(self.run, settings.results_dir, exitstatus=int(exitstatus), compare_run=settings.compare_run,
                        figure_cache=settings.cache_dir / "figures", interrupts=received, end=self.end)
        if received:
            self.end.interrupted = ("the run was published whole before the interrupt" if self.end.published
                                    else "nothing was published; every split keeps the previous complete run")
            session.exitstatus = pytest.ExitCode.INTERRUPTED
        elif self.end.failed or self.end.errors:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if (self.run is None or not self.run.splits) and not self.end.notices:
            return
        from reports.terminal import write_summary  # only when there is a summary to write

        settings = self.config.stash[SETTINGS]
        tables = {split: dict(record.tables) for split, record in (self.run.splits if self.run else {}).items()}
        frames = [(split, table, frame) for split, by_table in tables.items() for table, frame in by_table.items()]
        from reports.bottom_line import substitutions  # as the summary: only when there is one to write

        substituted = [f"[{split}] {line}" for split, record in (self.run.splits if self.run else {}).items()
                       for line in substitutions(record.entries, markdown=False)]
        write_summary(terminalreporter, frames, tables, self.end, settings.results_dir, settings.compare_run,
                      substituted)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{RECORDS}: the test reads the session's run record")
    if hasattr(config, "workerinput"):
        return  # xdist worker: the controller says why nothing is published
    config.pluginmanager.register(ReportPlugin(config), "nevir-report-plugin")
