"""Reference rows a run is set beside (never mixed into its rows): the paper's published Table II values on NevIR,
or a ``[data]`` set's own declared rows (``reference_rows``; docs/reference-results.md#your-own-dataset).

Source: *Preference Is Not Position: Evaluating Reranking on NevIR in Fixed Hybrid Candidate
Pools*, Sections V–VI and the conclusion (Test; GPU/API models). Only numbers the text states
are here; the rest are NA. Row names follow this suite's embedded profile (ce: BGE-reranker-v2-m3
window; grader: Qwen3-14B-AWQ window; grader_e0: the same with E0 as grade tie-breaker).

The paper's n = 2,736 is *its* Q_c: the directions its pools (text-embedding-v4, doubao sparse,
BM25) covered. This suite's pools are built by other models and cover a different number (the
embedded defaults: 2,735 on Test), so its rates are over a different population; ``note`` says
so beside every row, with this run's n when it is given.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from fixtures.reference import reference_rows_file
from reports.measures import TABLE2_COLUMNS

PAPER = "Preference Is Not Position (Section V, Table II), Test"
#: Per ranker, the Table II values the paper's text states (by contract column; any other is NA).
_ROWS: dict[str, dict[str, float]] = {
    "fusion": {"n": 2736, "strict": 1431, "strict_pct": 52.30, "paired": 147, "paired_pct": 10.79, "mrr": 0.5764,
               "pref_at_1": 33.59, "mean_rank_pos": 4.0, "mean_rank_neg": 4.2, "both_top10": 2547},
    "e0": {"n": 2736, "strict": 1549, "strict_pct": 56.62, "mrr": 0.3055, "mean_rank_pos": 92.3,
           "mean_rank_neg": 106.6, "both_top10": 64},
    "bg8": {"n": 2736, "strict": 1492, "strict_pct": 54.53, "mrr": 0.5859, "mean_rank_pos": 3.6, "mean_rank_neg": 3.9,
            "both_top10": 2609, "ties": 70},
    "ce": {"n": 2736, "strict_pct": 69.77, "paired_pct": 43.36, "mrr": 0.7404, "fallback": 0, "delta_pts": 17.47,
           "delta_lo": 15.81, "delta_hi": 19.05},
    "grader": {"n": 2736, "strict": 2119, "strict_pct": 77.45, "paired": 804, "paired_pct": 58.99, "mrr": 0.7509,
               "pref_at_1": 59.21, "fallback": 78, "delta_pts": 25.15, "delta_lo": 23.54, "delta_hi": 26.78},
    "grader_e0": {"n": 2736, "strict_pct": 78.47, "mrr": 0.7148},
}
#: The paper's Test population (directions and complete pairs its pools covered).
PAPER_N, PAPER_PAIRS = 2736, 1363
#: The contract columns the paper reports, in table2.csv's order.
COLUMNS = ("ranker", *(c for c in TABLE2_COLUMNS[1:] if any(c in values for values in _ROWS.values())))


def paper_note(run_n: int | None = None) -> str:
    """Why the paper's n and this run's differ (or the paper's n alone when this run's is not given)."""
    paper = f"the paper's n = {PAPER_N:,} directions ({PAPER_PAIRS:,} complete pairs) are those its own pools covered"
    if run_n is None:
        return f"{paper}; this suite's pools cover their own n (Table II)"
    if run_n == PAPER_N:
        return f"{paper}; this run also has n = {run_n:,}"
    return f"{paper}; this run has n = {run_n:,}: a different population, so rates are not directly comparable"


def paper_table2(split: str, run_n: int | None = None) -> pd.DataFrame | None:
    """The published Test rows (None for other splits: the paper's confirmation numbers are partial), each with
    a ``note`` on how its n relates to this run's (``run_n``: this run's full-population n on Test)."""
    if split != "test":
        return None
    frame = pd.DataFrame([{"ranker": r, **values} for r, values in _ROWS.items()], columns=list(COLUMNS)) \
        .astype({c: "Float64" for c in COLUMNS[1:]})
    frame.insert(0, "source", PAPER)
    frame["note"] = paper_note(run_n)
    return frame


@dataclass(frozen=True)
class ReferenceRows:
    """Rows a run is compared with on one split: their source, the rows (``ranker`` and Table II columns), how the
    bottom line names them and what a departure from them means."""

    source: str
    frame: pd.DataFrame

    @property
    def short(self) -> str:
        return "the paper" if self.source == PAPER else "the reference"

    @property
    def caveat(self) -> str:
        if self.source == PAPER:
            return ("Its values come from its GPU/API models and pools, matched to this run's rankers by role name: a "
                    "departure is a finding about this profile's models, not a failed reproduction.")
        return ("Its rows are matched to this run's rankers by name: a departure is a finding about this profile's "
                "models against the declared reference.")


def read_reference(path: Path) -> dict[str, Any]:
    """A ``[data]`` set's reference rows file, its columns checked against Table II's: the manifest entry
    ``{"file", "rows"}`` the report reads (``fixtures.reference.reference_rows_file``)."""
    return reference_rows_file(path, TABLE2_COLUMNS)


def reference_rows(dataset: Mapping[str, Any] | None, split: str, run_n: int | None = None) -> ReferenceRows | None:
    """The rows a run on ``split`` is compared with: on NevIR the paper's (Test only); on a ``[data]`` set its own
    declared rows for the split (the manifest's ``dataset`` entry carries them as ``reference``: ``read_reference``),
    of one source; None when there are none (the bottom line then says so for a dataset that is not NevIR)."""
    dataset = dict(dataset or {})
    if dataset.get("kind", "nevir") == "nevir":
        paper = paper_table2(split, run_n)
        return None if paper is None else ReferenceRows(PAPER, paper)
    declared = dataset.get("reference") or {}
    rows = [r for r in declared.get("rows", ()) if r.get("split") == split]
    if not rows:
        return None
    sources = sorted({str(r["source"]) for r in rows})
    frame = pd.DataFrame([{k: v for k, v in r.items() if k not in ("source", "split")} for r in rows])
    return ReferenceRows("; ".join(sources), frame)
