"""A stand-in engine for the small pytest projects the plugin and fault tests run in a subprocess.

The suite's engine (``harness.run.RunBuilder``) needs NevIR, pools and models; these projects need a run they
can shape and interrupt in a second. Their tests record rows through a ``report`` fixture (a
``reports.record.RecordBuilder``), and each test is one part of the run: a test that fails is a failed part, one
that is skipped a part that did not apply. At session end the record goes to the report plugin
(``reports.plugin.provide_run``) with the completeness rule the suite's engine applies: a run is partial when a
part failed, when a test was deselected or not run, or when a split lacks its manifest, Table I or a Table II row
for a declared ranker.
"""
from __future__ import annotations

import pytest

from reports.plugin import RECORDS, provide_run
from reports.record_builder import RecordBuilder
from reports.run_record import PartOutcome, RunRecord

BUILDER = pytest.StashKey[RecordBuilder]()
PARTS = pytest.StashKey[dict]()
#: Tests collected before deselection, and those that ran.
PLANNED = pytest.StashKey[set]()
RAN = pytest.StashKey[set]()
#: Characters of a failure message kept for the report.
MESSAGE_CHARS = 400


@pytest.fixture
def report(pytestconfig: pytest.Config) -> RecordBuilder:
    """The session's record builder: rows, manifest entries, artifacts and stages for the published run."""
    return pytestconfig.stash[BUILDER]


def _key(item: pytest.Item) -> tuple[str, str, str]:
    params = dict(getattr(getattr(item, "callspec", None), "params", {}))
    split = str(params.pop("split", ""))
    return item.originalname, split, "-".join(str(v) for v in params.values())


def pytest_configure(config: pytest.Config) -> None:
    config.stash[BUILDER] = RecordBuilder()
    config.stash[PARTS] = {}
    config.stash[PLANNED] = set()
    config.stash[RAN] = set()
    provide_run(config, lambda: _record(config))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    config.stash[PLANNED] |= {item.nodeid for item in items}
    for item in items:  # what reads the run, seen by the plugin on a pytest-xdist worker's report
        if "report" in getattr(item, "fixturenames", ()):
            item.add_marker(RECORDS)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    item.config.stash[RAN].add(item.nodeid)
    if report.failed and call.excinfo is not None:
        text = call.excinfo.exconly()
        item.config.stash[PARTS][_key(item)] = PartOutcome(error=RuntimeError(text[:MESSAGE_CHARS]))
    elif report.skipped and isinstance(report.longrepr, tuple):
        item.config.stash[PARTS][_key(item)] = PartOutcome(skipped=str(report.longrepr[2]).removeprefix("Skipped: "))


def _record(config: pytest.Config) -> RunRecord | None:
    builder = config.stash[BUILDER]
    if not builder.recorded:
        return None
    records = builder.records()
    parts = config.stash[PARTS]
    failed = sorted(f"{name}[{split}{'-' + param if param else ''}]" for (name, split, param), p in parts.items()
                    if p.error)
    partial = [f"{len(failed)} part(s) failed: {', '.join(failed)}"] if failed else []
    missing = config.stash[PLANNED] - config.stash[RAN]
    if missing:
        partial.append(f"{len(missing)} part(s) of the run not computed: {', '.join(sorted(missing)[:8])}")
    for split, record in records.items():
        absent = [name for name, present in (("manifest", bool(record.entries)), ("table1", "table1" in record.tables))
                  if not present]
        if absent:
            partial.append(f"{split}: no {', '.join(absent)} rows")
    return RunRecord(records, parts, tuple(partial))
