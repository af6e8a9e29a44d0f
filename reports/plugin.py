"""The pytest report plugin: glue between a pytest session and the run record it publishes at the end.

The session has one ``reports.record.RecordBuilder`` (``recorder(config)``): the suite's run
(``harness.run.RunBuilder``) computes into it, and any spec may hand it rows through the
``report`` fixture. At session end the plugin turns it into one ``RunRecord`` and publishes it
once (``reports.writer.publish_run``). A run replaces the complete results only when it is
complete (docs/protocol.md#publishing): per split the manifest, Table I and a Table II row (or
a recorded failure or skip) for every declared ranker, and nothing the sources registered
through ``add_gaps`` (the suite's run: every part of it its profile declares) left uncomputed.
Any other run is published whole under ``<results>/partial/`` instead, and the terminal says why.

pytest-xdist: the record lives in the process that computes it, so a run under ``-n`` publishes
nothing and says so; the evaluation needs no ``-n`` (its judging is parallel in its backends).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fixtures.settings import Settings
from reports.record import NotEvaluated, RecordBuilder, RunRecord, SessionEnd

#: The run's settings as ``harness.options`` read, checked and expanded them (the root conftest stores them).
SETTINGS = pytest.StashKey[Settings]()
#: The session's one record builder.
RECORDER = pytest.StashKey[RecordBuilder]()
#: Sources of reasons a run is partial beyond the per-split check (each returns its reasons; empty: complete).
GAPS = pytest.StashKey[list[Callable[[], list[str]]]]()
#: The mark of a test that records into the run (it uses the ``report`` fixture), seen on its report.
RECORDS = "nevir_records"
#: Characters of a failure message kept for the report.
MESSAGE_CHARS = 400
#: Why a run under pytest-xdist publishes nothing.
XDIST = ("pytest-xdist (-n): each worker computes its own share of the run, so no process holds the whole record; "
         "run the specs without -n (the judging backends are parallel themselves)")


def recorder(config: pytest.Config) -> RecordBuilder:
    """The session's record builder."""
    return config.stash[RECORDER]


def add_gaps(config: pytest.Config, source: Callable[[], list[str]]) -> None:
    """Register a source of reasons the run is partial, asked at session end."""
    config.stash[GAPS].append(source)


@pytest.fixture
def report(pytestconfig: pytest.Config) -> RecordBuilder:
    """The session's record builder: rows, manifest entries, artifacts and stages for the published run."""
    return recorder(pytestconfig)


def _message(report: pytest.TestReport, call: pytest.CallInfo) -> str:
    """The reason a test was skipped, or the first lines of the exception that failed it."""
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    text = call.excinfo.exconly() if call.excinfo is not None else str(report.longrepr)
    return text if len(text) <= MESSAGE_CHARS else text[:MESSAGE_CHARS] + "…"


class ReportPlugin:
    """Publishes the session's record at its end, and keeps the failed and skipped tests the report lists."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        #: Failed and skipped tests: node id -> (their parameters, ``NotEvaluated``).
        self.outcomes: dict[str, tuple[dict[str, Any], NotEvaluated]] = {}
        self.end = SessionEnd()
        self.run: RunRecord | None = None
        #: Under pytest-xdist: whether a worker ran a test that records into the run (its record stays there).
        self.recorded_elsewhere = False

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.recorded_elsewhere |= RECORDS in report.keywords and hasattr(report, "node")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        outcome = yield
        report = outcome.get_result()
        if (report.failed or report.skipped) and not hasattr(report, "wasxfail"):
            params = dict(getattr(getattr(item, "callspec", None), "params", {}))
            self.outcomes[item.nodeid] = (params, NotEvaluated(item.nodeid, report.outcome, _message(report, call)))

    def not_evaluated(self, split: str) -> tuple[NotEvaluated, ...]:
        """Failed and skipped tests of a split (or of every split), with their message."""
        return tuple(entry for _, (params, entry) in sorted(self.outcomes.items())
                     if params.get("split", split) == split)

    def gaps(self, records: dict[str, Any]) -> list[str]:
        """Why this run did not compute everything its splits' outputs need (empty: it did)."""
        gaps = [reason for source in self.config.stash[GAPS] for reason in source()]
        for split, record in records.items():
            missing = [name for name, present in (("manifest", bool(record.entries)),
                                                  ("table1", "table1" in record.tables)) if not present]
            if missing:
                gaps.append(f"{split}: no {', '.join(missing)} rows")
                continue
            accounted = set(record.rankers) | {
                v for params, _ in self.outcomes.values() if params.get("split", split) == split
                for v in params.values() if isinstance(v, str)}
            unaccounted = [r for r in record.declared if r not in accounted]
            if unaccounted:
                gaps.append(f"{split}: no Table II row and no recorded failure for {unaccounted}")
        return gaps

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        builder = recorder(self.config)
        if self.recorded_elsewhere:
            self.end.notices.append(XDIST)
        if not builder.recorded:
            return
        from reports.writer import deferred_signals, publish_run  # only when publishing

        records = builder.records()
        self.run = RunRecord(records, {s: self.not_evaluated(s) for s in records}, tuple(self.gaps(records)))
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
        builder = recorder(self.config)
        if not builder.recorded and not self.end.notices:
            return
        from reports.terminal import write_summary  # only when there is a summary to write

        settings = self.config.stash[SETTINGS]
        tables = builder.tables()
        frames = [(split, table, frame) for split, by_table in tables.items() for table, frame in by_table.items()]
        write_summary(terminalreporter, frames, tables, self.end, settings.results_dir, settings.compare_run)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "report" in getattr(item, "fixturenames", ()):
            item.add_marker(RECORDS)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{RECORDS}: the test records into the published run (report fixture)")
    config.stash[RECORDER] = RecordBuilder()
    config.stash[GAPS] = []
    if hasattr(config, "workerinput"):
        return  # xdist worker: the controller says why nothing is published
    config.pluginmanager.register(ReportPlugin(config), "nevir-report-plugin")
