"""The pytest report plugin: specs hand it their results; at session end it publishes them in one step.

Rows, manifest entries, artifacts and stage timings (``reports.record``) travel on ``item.user_properties`` so they survive pytest-xdist (workers serialize
them back to the controller); only the controller writes, once, in
``pytest_sessionfinish`` (``reports.writer.publish``), and rows are sorted by declared keys
so a parallel run writes the same files as a serial one. Failed and skipped tests travel the
same way with their parameters and message, so a bad ranker is listed with its error.

A run replaces the complete results only when it computed everything they need
(docs/protocol.md#publishing): nothing deselected (``-k``, ``-m``, ``--deselect``, ``--lf``),
no reporting spec file or test picked by path, every selected test run to its end, and per
split the manifest, Table I and a Table II row (or a recorded failure or skip) for every
declared ranker. Any other run is published whole under ``<results>/partial/`` instead,
and the terminal says why and where. This module is pytest glue only: the record in
``reports.record``, tables in ``reports.tables``, writing in ``reports.writer``, the terminal
summary in ``reports.terminal``, run history in ``reports.history``.
Paths and the run to compare with come from the run's validated ``Settings`` (``SETTINGS``,
stored by the root conftest), never from the raw options.
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from fixtures.settings import Settings
from reports.record import (ARTIFACT, ENTRY, RECORDED, ROW, STAGE, Artifact, NotEvaluated, SessionEnd, SplitRecord,
                            artifact_payload, entry_payload, row_payload, stage_payload)
from reports.tables import TABLES

#: The run's settings as ``harness.options`` read, checked and expanded them (the root conftest stores them).
SETTINGS = pytest.StashKey[Settings]()
#: A failed or skipped test's parameters and message, on its report (survives pytest-xdist like the rows).
OUTCOME_KEY = "nevir-outcome"
#: What a pytest-xdist worker tells the controller about its selection (``config.workeroutput``).
SELECTION_KEY = "nevir-selection"
#: Characters of a failure message kept for the report.
MESSAGE_CHARS = 400


class ReportRecorder:
    """What a spec uses to hand its results to the report (the ``report`` fixture): typed records, serialised
    once (``reports.record``) onto the test's ``user_properties`` so they survive pytest-xdist."""

    def __init__(self, node: pytest.Item) -> None:
        self._node = node

    def _put(self, payload: dict[str, Any]) -> None:
        self._node.user_properties.append((RECORDED, payload))

    def add(self, table: str, split: str, row: dict[str, Any], order: float | None = None) -> None:
        """Queue a result-table row; ``order`` places it within its table (declared ranker order), else its
        identifying keys do."""
        self._put(row_payload(table, split, row, order))

    def entry(self, split: str, key: str, value: Any) -> None:
        """A manifest entry (``manifest.json``): what a number came from."""
        self._put(entry_payload(split, key, value))

    def artifact(self, split: str, artifact: Artifact) -> None:
        """A sealed cached file behind the split's published files."""
        self._put(artifact_payload(split, artifact))

    def stage(self, split: str, row: dict[str, Any]) -> None:
        """The wall-clock of a stage a spec computed (``manifest.json``'s ``stages_wall_clock``)."""
        self._put(stage_payload(split, row))


@pytest.fixture
def report(request: pytest.FixtureRequest) -> ReportRecorder:
    """Hand rows to the session report (survives pytest-xdist)."""
    return ReportRecorder(request.node)


def _message(report: pytest.TestReport, call: pytest.CallInfo) -> str:
    """The reason a test was skipped, or the first lines of the exception that failed it."""
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    text = call.excinfo.exconly() if call.excinfo is not None else str(report.longrepr)
    return text if len(text) <= MESSAGE_CHARS else text[:MESSAGE_CHARS] + "…"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """A failed or skipped test carries its parameters and message to the controller (xdist-safe)."""
    outcome = yield
    report = outcome.get_result()
    if (report.failed or report.skipped) and not hasattr(report, "wasxfail"):
        params = getattr(getattr(item, "callspec", None), "params", {})
        report.user_properties.append((OUTCOME_KEY, {
            "test": item.nodeid, "outcome": report.outcome, "params": {k: str(v) for k, v in params.items()},
            "message": _message(report, call)}))


class SelectionRecorder:
    """How many tests this process deselected; an xdist worker hands the count to the controller."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.deselected = 0

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.deselected += len(items)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if hasattr(self.config, "workeroutput"):
            self.config.workeroutput[SELECTION_KEY] = {"deselected": self.deselected}


class ReportPlugin:
    """Collects rows on the controller and publishes every split's results at session end."""

    def __init__(self, config: pytest.Config, selection: SelectionRecorder) -> None:
        self.config = config
        self.selection = selection
        self.rows: dict[tuple[str, str], dict[tuple, tuple[float, dict[str, Any]]]] = {}
        self.entries: dict[str, dict[str, Any]] = {}
        self.artifacts: dict[str, dict[str, Artifact]] = {}
        self.stages: dict[str, dict[str, dict[str, Any]]] = {}
        self.outcomes: dict[str, dict[str, Any]] = {}
        self.finished: set[str] = set()
        self.reporting_files: set[str] = set()
        self.worker_deselected = 0
        self.end = SessionEnd()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or not report.passed:
            self.finished.add(report.nodeid)
        for key, payload in report.user_properties:
            if key == OUTCOME_KEY:
                self.outcomes[payload["test"]] = payload
            if key != RECORDED:
                continue
            self.reporting_files.add(report.nodeid.split("::")[0])
            split, kind = payload["split"], payload["kind"]
            if kind == ROW:
                table, row, order = payload["table"], payload["row"], payload["order"]
                ident = tuple(str(row[k]) for k in TABLES[table][1])
                self.rows.setdefault((split, table), {})[ident] = (math.inf if order is None else float(order), row)
            elif kind == ENTRY:
                self.entries.setdefault(split, {})[payload["key"]] = payload["value"]
            elif kind == ARTIFACT:
                artifact = Artifact(**payload["artifact"])
                self.artifacts.setdefault(split, {})[artifact.name] = artifact
            elif kind == STAGE:
                self.stages.setdefault(split, {})[str(payload["row"]["stage"])] = payload["row"]

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        """pytest-xdist: a worker's deselection count (every worker collects, and deselects, the same tests)."""
        selection = getattr(node, "workeroutput", {}).get(SELECTION_KEY, {})
        self.worker_deselected = max(self.worker_deselected, int(selection.get("deselected", 0)))

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

    def records(self) -> dict[str, SplitRecord]:
        """One record per split that has result rows: its tables, manifest entries, artifacts and stages."""
        records = {}
        for split, tables in self.tables().items():
            stages = self.stages.get(split)
            records[split] = SplitRecord(
                split, tables, self.entries.get(split, {}),
                tuple(a for _, a in sorted(self.artifacts.get(split, {}).items())),
                pd.DataFrame([row for _, row in sorted(stages.items())]) if stages else None)
        return records

    def not_evaluated(self, split: str) -> list[NotEvaluated]:
        """Failed and skipped tests of a split (or of every split), with their message."""
        return [NotEvaluated(o["test"], o["outcome"], o["message"])
                for o in sorted(self.outcomes.values(), key=lambda o: o["test"])
                if o["params"].get("split", split) == split]

    def _narrowed(self) -> list[str]:
        """Path arguments that pick some, not all, tests of a file or folder that reports rows."""
        base = Path(self.config.invocation_params.dir)
        reporting = [self.config.rootpath / f for f in self.reporting_files]
        picked = []
        for arg in self.config.args:
            path = (base / arg.split("::")[0]).resolve()
            if ("::" in arg or not path.is_dir()) and any(f.resolve() == path for f in reporting):
                picked.append(arg)
        for option in ("ignore", "ignore_glob"):
            for ignored in self.config.getoption(option, None) or []:
                if any(f.resolve().is_relative_to((base / ignored).resolve().parent) for f in reporting):
                    picked.append(f"--{option.replace('_', '-')}={ignored}")
        return picked

    def gaps(self, session: pytest.Session, records: dict[str, SplitRecord]) -> list[str]:
        """Why this run did not compute everything its splits' outputs need (empty: it did)."""
        gaps = []
        deselected = max(self.selection.deselected, self.worker_deselected)
        if deselected:
            gaps.append(f"{deselected} test(s) deselected (-k, -m, --deselect or --lf)")
        if self.config.getoption("lf", None):
            gaps.append("--lf: only the tests that failed last time were run")
        narrowed = self._narrowed()
        if narrowed:
            gaps.append(f"tests picked by path: {', '.join(narrowed)}")
        unfinished = session.testscollected - len(self.finished)
        if unfinished > 0:
            gaps.append(f"{unfinished} selected test(s) did not run to their end (-x, --maxfail or a crash)")
        for split, record in records.items():
            missing = [name for name, present in (("manifest", bool(record.entries)),
                                                  ("table1", "table1" in record.tables)) if not present]
            if missing:
                gaps.append(f"{split}: no {', '.join(missing)} rows")
                continue
            accounted = set(record.rankers) | {
                v for o in self.outcomes.values() if o["params"].get("split", split) == split
                for v in o["params"].values()}
            unaccounted = [r for r in record.declared if r not in accounted]
            if unaccounted:
                gaps.append(f"{split}: no Table II row and no recorded failure for {unaccounted}")
        return gaps

    @property
    def recorded(self) -> set[str]:
        """The splits anything was recorded for."""
        return {split for split, _ in self.rows} | set(self.entries) | set(self.artifacts) | set(self.stages)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not self.recorded:
            return
        from reports.writer import deferred_signals  # only when publishing

        with deferred_signals() as received:
            self._publish(session, int(exitstatus), received)
        if received:
            self.end.interrupted = ("the run was published whole before the interrupt" if self.end.published
                                else "nothing was published; every split keeps the previous complete run")
            session.exitstatus = pytest.ExitCode.INTERRUPTED
        elif self.end.failed or self.end.errors:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _publish(self, session: pytest.Session, exitstatus: int, interrupts: list[int]) -> None:
        from reports.history import run_id, save_to_history  # pandas I/O only at session end
        from reports.writer import INTERRUPTED, PARTIAL, PublishError, publish  # only when publishing

        settings = self.config.stash[SETTINGS]
        results_dir = settings.results_dir
        if exitstatus == INTERRUPTED:
            self.end.notices.append(f"the run was interrupted: nothing published; {results_dir} keeps the previous "
                                "complete results")
            return
        records = {split: r for split, r in self.records().items() if "table2" in r.tables}
        for split in sorted(self.recorded - set(records)):  # benchmarks only, or no ranker selected
            self.end.notices.append(f"{split}: no Table II row in this run (benchmarks or a partial selection); "
                                f"nothing of it is published")
        if not records:
            return
        self.end.partial = self.gaps(session, records)
        root = results_dir / PARTIAL if self.end.partial else results_dir
        ident = run_id(list(records.values()), partial=bool(self.end.partial))
        if settings.compare_run:  # before publishing: the saved run may be the very folder about to be replaced
            records = {split: self._compared(record, results_dir, settings.compare_run)
                       for split, record in records.items()}
        try:
            self.end.published = publish(root, ident, records, exitstatus=exitstatus,
                                     figure_cache=settings.cache_dir / "figures",
                                     not_evaluated={s: self.not_evaluated(s) for s in records},
                                     partial=self.end.partial, interrupts=interrupts)
        except PublishError as exc:
            self.end.failed.append(str(exc))
        if self.end.published:  # a partial run too, marked (docs/protocol.md#publishing)
            try:
                self.end.healed = save_to_history(results_dir, ident, records, self.end.published).healed
                self.end.saved = ident
            except Exception as exc:  # noqa: BLE001 - the published run stands; the error is reported
                self.end.errors.append(f"published, but not saved to the history ({type(exc).__name__}: {exc})")

    def _compared(self, record: SplitRecord, results_dir: Path, other: str) -> SplitRecord:
        """The record with its ``comparison`` table against the saved run ``other``; unchanged (and the error
        reported, the run still published) when the comparison cannot be made."""
        from reports.history import comparison_table  # pandas I/O only at session end

        try:
            comparison = comparison_table(results_dir, other, record)
        except Exception as exc:  # noqa: BLE001 - the run is still published; the error is reported
            self.end.errors.append(f"{record.split}: no comparison with {other} ({type(exc).__name__}: {exc})")
            return record
        self.end.comparison[record.split] = comparison
        return record.with_table("comparison", comparison)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.recorded:
            return
        from reports.terminal import write_summary  # only when there is a summary to write

        settings = self.config.stash[SETTINGS]
        write_summary(terminalreporter, list(self.frames()), self.tables(), self.end, settings.results_dir,
                      settings.compare_run)


def pytest_configure(config: pytest.Config) -> None:
    selection = SelectionRecorder(config)
    config.pluginmanager.register(selection, "nevir-selection")
    if hasattr(config, "workerinput"):
        return  # xdist worker: rows go to the controller through the reports
    config.pluginmanager.register(ReportPlugin(config, selection), "nevir-report-plugin")
