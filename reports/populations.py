"""Table I rows: planned, covered and eligible directions, groups and complete pairs (docs/protocol.md#populations).

Q_c itself is decided in ``fixtures.populations``; this module only counts it.
"""
from __future__ import annotations

import pandas as pd

from fixtures.populations import POPULATION_COLUMNS, REQUIRED, require_columns


def table1_row(directions_annotated: pd.DataFrame, split: str) -> dict[str, object]:
    """One Table I row for ``split``.

    Planned counts come from the directions alone; coverage counts only when the
    frame was annotated with a pool (otherwise those keys are absent, never zero).
    ``groups`` counts source groups of eligible directions; ``group_rules`` (Test
    only, else None) the same under the Train/Validation grouping rules, the
    bootstrap's sensitivity check.
    """
    require_columns(directions_annotated, REQUIRED, "directions frame")
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
    require_columns(d, POPULATION_COLUMNS, "annotated directions frame")
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
