"""Evaluation populations over a fixed pool: coverage, eligibility, complete pairs (SPEC §1, Table I).

Q_c is decided here once, from the planned directions and the frozen pool, so every
measure, run file and table counts exactly the same directions. Missing designated
passages are never inserted: a direction whose pair is not jointly retrieved is
simply not covered.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

#: Columns a directions frame must carry for populations (built by fixtures.study).
REQUIRED = ("qid", "pair_id", "split", "preferred_pid", "counterpart_pid", "group", "conflict")
POPULATION_COLUMNS = ("covered", "eligible", "complete")


def _require(frame: pd.DataFrame, columns: tuple[str, ...], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{what} lacks columns {missing}")


def annotate_population(directions: pd.DataFrame, pool: pd.DataFrame | None) -> pd.DataFrame:
    """Copy of ``directions`` with ``covered``, ``eligible`` and ``complete`` added.

    ``covered``: both designated passages are pool rows of that qid; ``eligible``:
    covered and not a structural conflict; ``complete``: both directions of the pair
    (within its split) eligible. With ``pool=None`` the copy carries no population
    columns, so nothing downstream can count groups over an absent pool.
    """
    _require(directions, REQUIRED, "directions frame")
    out = directions.drop(columns=[c for c in POPULATION_COLUMNS if c in directions.columns]).copy()
    if pool is None:
        return out
    _require(pool, ("qid", "pid"), "pool frame")
    members = pd.MultiIndex.from_arrays([pool["qid"].astype(str), pool["pid"].astype(str)])
    qid = out["qid"].astype(str)
    has_pos = pd.MultiIndex.from_arrays([qid, out["preferred_pid"].astype(str)]).isin(members)
    has_neg = pd.MultiIndex.from_arrays([qid, out["counterpart_pid"].astype(str)]).isin(members)
    out["covered"] = has_pos & has_neg
    out["eligible"] = out["covered"] & ~out["conflict"].astype(bool).to_numpy()
    per_pair = out.groupby(["split", "pair_id"], sort=False)["eligible"]
    out["complete"] = out["eligible"] & (per_pair.transform("sum").to_numpy() == 2)
    return out


def table1_row(directions_annotated: pd.DataFrame, split: str) -> dict[str, object]:
    """One Table I row for ``split``.

    Planned counts come from the directions alone; coverage counts only when the
    frame was annotated with a pool (otherwise those keys are absent, never zero).
    ``groups`` counts source groups of eligible directions; ``group_rules`` (Test
    only, else None) the same under the Train/Validation grouping rules, the
    bootstrap's sensitivity check.
    """
    _require(directions_annotated, REQUIRED, "directions frame")
    d = directions_annotated[directions_annotated["split"] == split]
    if d.empty:
        raise ValueError(f"no planned directions for split {split!r}")
    row: dict[str, object] = {
        "split": split,
        "planned_directions": int(len(d)),
        "planned_pairs": int(d["pair_id"].nunique()),
        "conflicts": int(d["conflict"].astype(bool).sum()),
        "planned_groups": int(d["group"].nunique()),
    }
    if "covered" not in d.columns:
        return row
    _require(d, POPULATION_COLUMNS, "annotated directions frame")
    eligible = d[d["eligible"].astype(bool)]
    row.update({
        "covered": int(d["covered"].astype(bool).sum()),
        "eligible": int(len(eligible)),
        "groups": int(eligible["group"].nunique()),
        "complete_pairs": int(eligible.loc[eligible["complete"].astype(bool), "pair_id"].nunique()),
        "incomplete_eligible": int((~eligible["complete"].astype(bool)).sum()),
        "group_rules": int(eligible["group_rules"].nunique()) if split == "test" and "group_rules" in d.columns else None,
    })
    return row


def eligible_directions(directions_annotated: pd.DataFrame) -> pd.DataFrame:
    """The Q_c rows, with a clear error when the frame was never annotated with a pool."""
    if "eligible" not in directions_annotated.columns:
        raise ValueError("directions frame has no 'eligible' column: annotate it with a pool first (annotate_population)")
    return directions_annotated[np.asarray(directions_annotated["eligible"], dtype=bool)]
