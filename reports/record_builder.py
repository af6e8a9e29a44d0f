"""The run's record builder: what a run computes, collected part by part, then one ``SplitRecord`` per split.

The parts of a run (``harness.parts``) record four things here: rows of result tables, manifest entries,
artifacts (cached files behind the results) and stage timings. ``RecordBuilder.records`` orders each table's rows
by the declared ranker order and their identifying columns, so the order parts ran in never changes a file; the
engine (``harness.run.RunBuilder``) wraps the records in the ``RunRecord`` everyone reads.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from reports.record import Artifact, SplitRecord
from reports.table_registry import TABLES


def plain(value: Any) -> Any:
    """A value as plain JSON data (numpy scalars, NaN as None, paths as text), as a payload must be."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
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



def _identity(table: str, row: Mapping[str, Any]) -> tuple:
    """A row's identifying values in its table (``TABLES``): a later row with the same identity replaces it."""
    if table not in TABLES:
        raise KeyError(f"unknown report table {table!r}; known: {sorted(TABLES)}")
    missing = [k for k in TABLES[table].keys if k not in row]
    if missing:
        raise KeyError(f"row for {table} lacks identifying columns {missing}")
    return tuple(row[k] for k in TABLES[table].keys)


class RecordBuilder:
    """Collects what a run computes, split by split, and builds its ``SplitRecord``s.

    Rows are placed by their declared ``order`` (a ranker's place in the profile), then by their
    identifying columns, so the order they were computed in never changes a published file.
    """

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], dict[tuple, tuple[float, dict[str, Any]]]] = {}
        self.entries: dict[str, dict[str, Any]] = {}
        self.artifacts: dict[str, dict[str, Artifact]] = {}
        self.stages: dict[str, dict[str, dict[str, Any]]] = {}

    def add(self, table: str, split: str, row: Mapping[str, Any], order: float | None = None) -> None:
        """A result-table row; ``order`` places it within its table (declared ranker order), else its
        identifying columns do."""
        ident = _identity(table, row)
        self.rows.setdefault((split, table), {})[ident] = (math.inf if order is None else float(order),
                                                           plain(dict(row)))

    def entry(self, split: str, key: str, value: Any) -> None:
        """A manifest entry (``manifest.json``): what a number came from."""
        self.entries.setdefault(split, {})[key] = plain(value)

    def artifact(self, split: str, artifact: Artifact) -> None:
        """A sealed cached file behind the split's published files."""
        self.artifacts.setdefault(split, {})[artifact.name] = artifact

    def stage(self, split: str, row: Mapping[str, Any]) -> None:
        """The wall-clock of a stage (``manifest.json``'s ``stages_wall_clock``)."""
        self.stages.setdefault(split, {})[str(row["stage"])] = plain(dict(row))

    def table_rows(self, split: str, table: str) -> list[dict[str, Any]]:
        """The rows of one table of one split recorded so far (computation order; ``tables`` orders them)."""
        return [row for _, row in self.rows.get((split, table), {}).values()]

    def row(self, split: str, table: str, *ident: Any) -> dict[str, Any]:
        """The row of ``table`` with these identifying values (KeyError naming them when none was recorded)."""
        try:
            return self.rows[(split, table)][ident][1]
        except KeyError:
            raise KeyError(f"{split}: no {table} row {ident} recorded") from None

    @property
    def recorded(self) -> set[str]:
        """The splits anything was recorded for."""
        return {split for split, _ in self.rows} | set(self.entries) | set(self.artifacts) | set(self.stages)

    def tables(self) -> dict[str, dict[str, pd.DataFrame]]:
        """Per split, every table with rows, its rows in order and its columns in the table's
        (``reports.table_registry.TABLES``): the order rows were computed in never reorders a file's columns."""
        out: dict[str, dict[str, pd.DataFrame]] = {}
        for (split, table), rows in sorted(self.rows.items()):
            ordered = sorted(rows.items(), key=lambda item: (item[1][0], item[0]))
            frame = pd.DataFrame([row for _, (_, row) in ordered])
            out.setdefault(split, {})[table] = frame[TABLES[table].ordered(frame.columns)]
        return out

    def records(self) -> dict[str, SplitRecord]:
        """One record per split that has result rows or manifest entries: its tables, manifest entries, artifacts
        and stages (a split only stage timings reached is no record)."""
        records = {}
        tables = self.tables()
        for split in sorted(set(tables) | set(self.entries)):
            stages = self.stages.get(split)
            records[split] = SplitRecord(
                split, tables.get(split, {}), self.entries.get(split, {}),
                tuple(a for _, a in sorted(self.artifacts.get(split, {}).items())),
                pd.DataFrame([row for _, row in sorted(stages.items())]) if stages else None)
        return records
