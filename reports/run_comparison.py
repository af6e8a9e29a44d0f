"""Whether each measure changed between a run and a saved one: the ``comparison.csv`` of ``--compare-to``.

Two runs are compared as a paired experiment when they share the pool snapshot, so both evaluated the same
directions; each measure's decision (changed, unchanged, ...) is ``reports.changes``'s. Without per-direction
outcomes of both runs (another pool snapshot) the comparison is *unpaired*: it says so. The paper's published
values ride along as a labeled reference column for Test. The saved run is read through ``reports.history``,
which refuses one that is not sealed with this user's key or whose files changed (docs/outputs.md).
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from fixtures.environment import version_changes
from fixtures.settings import SEED
from reports.changes import ChangeVerdict, paired_change
from reports.history import (COMPARED, SavedSplit, partial_reasons, pool_digest, ranker_outcomes, record_outcomes,
                             saved_split)
from reports.measures import paired_measure
from reports.paper import paper_table2
from reports.record import SplitRecord
from reports.table_registry import COMPARISON_COLUMNS, TABLES


def compare_tables(now: pd.DataFrame, then: pd.DataFrame, split: str,
                   now_outcomes: pd.DataFrame | None = None, then_outcomes: pd.DataFrame | None = None,
                   margins: Mapping[str, float] | None = None, seed: int = SEED) -> pd.DataFrame:
    """Per ranker and measure: now, then, Δ and the decision (paired where both runs' outcomes are given).

    ``now_outcomes``/``then_outcomes`` are the two runs' outcomes (``reports.history.STORED_OUTCOME_COLUMNS``) on
    the same pool snapshot; a measure without a paired test (n, paired_pct) or a ranker missing from either
    is compared unpaired: Δ only, decision ``undetermined`` unless the values are equal.
    """
    paper = paper_table2(split, int(now["n"].max()) if len(now) else None)
    paper_rows = paper.set_index("ranker") if paper is not None else None
    then_rows = then.set_index("ranker")
    rows = []
    for _, row in now.iterrows():
        name = row["ranker"]
        pair = _paired_outcomes(name, now_outcomes, then_outcomes)
        for measure in COMPARED:
            if measure not in now.columns:
                continue
            old = then_rows.at[name, measure] if name in then_rows.index and measure in then_rows.columns else np.nan
            value = row[measure]
            verdict = _verdict(measure, value, old, pair, margins or {}, seed)
            ref = np.nan
            if paper_rows is not None and name in paper_rows.index and measure in paper_rows.columns:
                ref = paper_rows.at[name, measure]
            rows.append({"ranker": name, "measure": measure, "now": value, "then": old, "delta": verdict.delta,
                         "delta_lo": verdict.lo, "delta_hi": verdict.hi, "p_changed": verdict.p_changed,
                         "p_unchanged": verdict.p_unchanged, "margin": verdict.margin,
                         "certifiable_margin": verdict.certifiable, "decision": verdict.decision,
                         "basis": verdict.basis, "n": verdict.n if verdict.basis == "paired" else np.nan,
                         "differing_groups": verdict.differing_groups if verdict.basis == "paired" else np.nan,
                         "discordant": verdict.discordant if verdict.basis == "paired" else np.nan, "paper": ref})
    return pd.DataFrame(rows, columns=list(COMPARISON_COLUMNS))


def _paired_outcomes(ranker: str, now: pd.DataFrame | None, then: pd.DataFrame | None):
    """(now outcomes, then outcomes aligned to them, their groups), or None when the runs cannot be paired."""
    if now is None or then is None:
        return None
    a, b = ranker_outcomes(now, ranker), ranker_outcomes(then, ranker)
    if a is None or b is None or len(a) != len(b) or set(a["qid"]) != set(b["qid"]):
        return None
    groups = now[now["ranker"] == ranker]["group"]
    if groups.isna().any():
        return None
    b = b.set_index("qid").loc[a["qid"]].reset_index()
    return a, b, groups.to_numpy(dtype=str)


def _verdict(measure: str, value: float, old: float, pair, margins: Mapping[str, float], seed: int) -> ChangeVerdict:
    nan = float("nan")
    if pd.isna(old) and pd.isna(value):
        return ChangeVerdict("unchanged", "measured in neither run", value, old, nan)
    if pd.isna(old) or pd.isna(value):
        return ChangeVerdict("undetermined", "not in both runs", value, old, nan)
    if pair is not None:
        try:
            paired = paired_measure(measure)
        except KeyError:
            paired = None
        if paired is not None and (not paired.position or all(o["rank_pos"].notna().all() for o in pair[:2])):
            return paired_change(measure, pair[0], pair[1], pair[2], margins.get(paired.name), seed)
    why = "unpaired" if pair is None else "no per-direction test for this measure"
    return ChangeVerdict("unchanged" if value == old else "undetermined", why, value, old, value - old)


def compare_with(results_dir: Path, other: str, record: SplitRecord) -> pd.DataFrame:
    """A split's record (Table II, manifest entries, outcomes) against a saved run's, paired when both runs hold
    outcomes on the same pool snapshot; margins from this run's manifest entries."""
    saved = saved_split(results_dir, other, record.split)
    return _compared(saved, record)


def _compared(saved: SavedSplit, record: SplitRecord) -> pd.DataFrame:
    entries = record.entries
    paired = pool_digest(entries) is not None and pool_digest(entries) == pool_digest(saved.manifest)
    margins = entries.get("margins") if isinstance(entries.get("margins"), Mapping) else {}
    return compare_tables(record.tables["table2"], saved.table2(), record.split,
                          record_outcomes(record) if paired else None, saved.all_outcomes if paired else None,
                          margins)


def comparison_table(results_dir: Path, other: str, record: SplitRecord) -> pd.DataFrame:
    """``compare_with`` with the rankers matched by name made explicit, for ``comparison.csv``: a ``side``
    column says whether a ranker is in both runs (compared), in this run only, or in the saved run only (one
    row each, not compared)."""
    saved = saved_split(results_dir, other, record.split)
    then, table2 = saved.table2(), record.tables["table2"]
    table = _compared(saved, record)
    mine, theirs = record.entries.get("environment"), saved.manifest.get("environment")
    moved = version_changes(mine, theirs) if isinstance(mine, Mapping) and isinstance(theirs, Mapping) else []
    # A value that moved may owe it to the libraries: say which versions differ (or that the saved run lacks them).
    table["versions_differ"] = "; ".join(moved) if moved else ("" if isinstance(theirs, Mapping) else "not recorded")
    now_names, then_names = set(table2["ranker"]), set(then["ranker"])
    table.insert(1, "side", ["both" if r in then_names else "this run only" for r in table["ranker"]])
    only_then = [r for r in then["ranker"] if r not in now_names]
    extra = pd.DataFrame({"ranker": only_then, "side": "saved run only", "measure": "(not compared)"})
    table = pd.concat([table, extra], ignore_index=True) if only_then else table
    # A partial saved run holds only what it selected: the rankers both hold are compared, the rest listed.
    table["saved_partial"] = "; ".join(partial_reasons(saved.manifest))
    return table[list(TABLES["comparison"].columns)]
