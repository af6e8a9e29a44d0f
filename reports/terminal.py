"""The terminal summary of a run: each table in brief, then what needs the user's attention, then where it went.

Shown after the tests (``reports.plugin``): tables flagged for the terminal (``reports.table_registry.TABLES``),
sequential stops, inherited checks missed, expectations a subset cannot decide, lost verdicts,
unavailable judgments, cut inputs, the comparison with a saved run, and what publishing did. Before it, the
session's skips are folded (``fold_skips``) so that pytest's own summary says each reason once.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from reports.record import SessionEnd
from reports.render import terminal_tables, unavailable_lines
from reports.report_md import comparison_brief, inherited_misses, lost_expectations, undecidable_on_subset
from reports.sequential import stop_lines
from reports.table_registry import TABLES


def comparison_text(split: str, compare_run: str | None, frame: pd.DataFrame) -> list[str]:
    """The comparison with a saved run in the terminal: the rankers that moved lead, the unchanged ones are named in
    one line, and the saved run's partiality is said once (``reports.report_md.comparison_brief``)."""
    brief = comparison_brief(frame)
    lines = [f"\n[{split}] Comparison with {compare_run} (comparison.csv; rankers matched by name)"]
    if brief.saved_partial:
        lines.append(f"the saved run is partial ({brief.saved_partial}): the rankers both runs hold are compared")
    if brief.versions_differ:
        lines.append(f"installed versions that differ from the saved run: {brief.versions_differ}")
    if len(brief.moved):
        lines += ["not unchanged, gravest first:", terminal_tables("comparison", brief.moved)]
    if brief.unchanged:
        lines.append(f"unchanged in every measure: {', '.join(brief.unchanged)}")
    lines += [f"rankers in {side}, not compared: {', '.join(names)}" for side, names in brief.one_sided.items()]
    return lines


#: How pytest prefixes the reason of a skip raised by ``pytest.skip`` (a skip mark's reason has no prefix).
SKIPPED_PREFIX = "Skipped: "


def fold_skips(reports: Iterable[Any], start: Path) -> int:
    """Give every skip whose reason recurs at several places one place, the folder that holds them all (no line), and
    return how many reports were moved.

    pytest's ``-ra`` summary (the suite's addopts) folds skips by place and reason, and a ranker that cannot run
    here, or does not apply to the dataset, skips every spec that computes it: without this, a dataset without a
    train split printed its reason once per spec file (about thirty lines); with it, once per reason, with its
    count. A report's ``longrepr`` of a skip is documented as (path, line, reason); the place is all that changes.
    """
    skips = [r for r in reports if isinstance(getattr(r, "longrepr", None), tuple) and len(r.longrepr) == 3]
    places: dict[str, set[tuple[str, int | None]]] = {}
    for report in skips:
        path, line, reason = report.longrepr
        places.setdefault(str(reason).removeprefix(SKIPPED_PREFIX), set()).add((os.fspath(start / path), line))
    moved = 0
    for report in skips:
        reason = str(report.longrepr[2]).removeprefix(SKIPPED_PREFIX)
        if len(places[reason]) > 1:
            report.longrepr = (os.path.commonpath(sorted(p for p, _ in places[reason])), None, reason)
            moved += 1
    return moved


def write_summary(terminalreporter: Any, frames: Sequence[tuple[str, str, pd.DataFrame]],
                  tables: Mapping[str, Mapping[str, pd.DataFrame]], end: SessionEnd, results_dir: Path,
                  compare_run: str | None, substituted: Sequence[str] = ()) -> None:
    """The summary section: ``frames`` are the run's (split, table, frame) in order, ``tables`` the same per split,
    ``substituted`` the rows another model scored in a refused shipped one's place (``reports.bottom_line.
    substitutions``, each prefixed by its split). It runs before pytest's short summary, whose skip lines it folds
    first (``fold_skips``)."""
    fold_skips(terminalreporter.stats.get("skipped", ()), Path(terminalreporter.startpath))
    terminalreporter.section("Preference Is Not Position: report")
    causes, cut, lost, moved, undecidable, stops = [], [], [], [], [], []
    for split, table, frame in frames:
        if TABLES[table].terminal:
            terminalreporter.write_line(f"\n[{split}] {TABLES[table].title}")
            terminalreporter.write_line(terminal_tables(table, frame))
        if table == "unavailable":
            causes += [f"[{split}] {line}" for line in unavailable_lines(frame)]
        if table == "cost" and "truncated" in frame.columns:
            cut += [f"[{split}] {stage}: {int(n):,} inputs cut to the scorer's input budget (cost.csv, truncated)"
                    for stage, n in zip(frame["stage"], frame["truncated"]) if pd.notna(n) and n > 0]
        if table == "claims":
            lost += [f"[{split}] {line}" for line in lost_expectations(frame)]
            moved += [f"[{split}] {line}" for line in inherited_misses(frame)]
            undecidable += [f"[{split}] {line}" for line in undecidable_on_subset(frame)]
        if table == "sequential":
            stops += [f"[{split}] {line}" for line in stop_lines(frame, tables[split].get("claims"))]
    notes = (
        (list(substituted), "ANOTHER MODEL SCORED THESE ROWS (the shipped one was refused; manifest.json "
                            "model:<ranker>):", {"red": True}),
        (stops, "SEQUENTIAL CLAIMS: where each one's sample stopped (sequential.csv; "
                "docs/statistics.md#sequential-samples):", {}),
        ([line.replace("**", "") for line in moved], "INHERITED CHECKS MISSED (reported, not failed; [profile] "
                                                     "inherit_checks = true fails on them):", {"yellow": True}),
        ([line.replace("**", "") for line in undecidable], "EXPECTATIONS NOT DECIDABLE ON THIS SUBSET (reviewed on "
                                                           "the full run, not checked here):", {"yellow": True}),
        ([line.replace("**", "") for line in lost], "REVIEWED VERDICTS NO LONGER DECIDED (--gate-expectations fails "
                                                    "on them):", {"red": True}),
        (causes, f"{TABLES['unavailable'].title}:", {"yellow": True}),
        (cut, "Inputs judged on a cut text (counted in cost.csv):", {"yellow": True}),
    )
    for lines, heading, color in notes:
        if lines:
            terminalreporter.write_line(f"\n{heading}", **color)
            for line in lines:
                terminalreporter.write_line(line, **color)
    for split, frame in end.comparison.items():
        for line in comparison_text(split, compare_run, frame):
            terminalreporter.write_line(line)
    for message in end.notices:
        terminalreporter.write_line(f"\nnot published: {message}")
    for message in end.failed:
        terminalreporter.write_line(f"\nRESULTS NOT PUBLISHED: {message}", red=True)
    for message in end.errors:
        terminalreporter.write_line(f"\nERROR at session end: {message}", red=True)
    if end.interrupted:
        terminalreporter.write_line(f"\nINTERRUPTED while publishing: {end.interrupted}", red=True)
    if end.partial and end.published:
        terminalreporter.write_line(
            "\nPARTIAL RUN, published apart from the complete results: " + "; ".join(end.partial) +
            f". {results_dir} keeps the last complete run.", yellow=True)
    for split, path in end.published.items():
        terminalreporter.write_line(f"\n[{split}] results written to {path}")
    if end.saved:
        terminalreporter.write_line(f"kept in the history as {end.saved} (--compare-to {end.saved})")
    if end.healed:
        terminalreporter.write_line(end.healed)
    if end.kept:
        terminalreporter.write_line(end.kept, yellow=True)
