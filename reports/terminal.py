"""The terminal summary of a run: each table in brief, then what needs the user's attention, then where it went.

Shown after the tests (``reports.plugin``): tables flagged for the terminal (``reports.tables.TABLES``),
sequential stops, inherited checks missed, expectations a subset cannot decide, lost verdicts,
unavailable judgments, cut inputs, the comparison with a saved run, and what publishing did.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from reports.record import SessionEnd
from reports.render import terminal_tables, unavailable_lines
from reports.report_md import comparison_brief, inherited_misses, lost_expectations, undecidable_on_subset
from reports.sequential import stop_lines
from reports.tables import TABLES


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


def write_summary(terminalreporter: Any, frames: Sequence[tuple[str, str, pd.DataFrame]],
                  tables: Mapping[str, Mapping[str, pd.DataFrame]], end: SessionEnd, results_dir: Path,
                  compare_run: str | None) -> None:
    """The summary section: ``frames`` are the run's (split, table, frame) in order, ``tables`` the same per split."""
    terminalreporter.section("Preference Is Not Position: report")
    causes, cut, lost, moved, undecidable, stops = [], [], [], [], [], []
    for split, table, frame in frames:
        if TABLES[table][2]:
            terminalreporter.write_line(f"\n[{split}] {TABLES[table][0]}")
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
        (stops, "SEQUENTIAL CLAIMS: where each one's sample stopped (sequential.csv; "
                "docs/statistics.md#sequential-samples):", {}),
        ([line.replace("**", "") for line in moved], "INHERITED CHECKS MISSED (reported, not failed; [profile] "
                                                     "inherit_checks = true fails on them):", {"yellow": True}),
        ([line.replace("**", "") for line in undecidable], "EXPECTATIONS NOT DECIDABLE ON THIS SUBSET (reviewed on "
                                                           "the full run, not checked here):", {"yellow": True}),
        ([line.replace("**", "") for line in lost], "REVIEWED VERDICTS NO LONGER DECIDED (--gate-expectations fails "
                                                    "on them):", {"red": True}),
        (causes, f"{TABLES['unavailable'][0]}:", {"yellow": True}),
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
