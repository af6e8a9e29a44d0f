"""The paper's published Table II values, as a labeled reference beside a run (never mixed into its rows).

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

import pandas as pd

PAPER = "Preference Is Not Position (Section V, Table II), Test"
#: (ranker, n, strict, strict_pct, paired, paired_pct, mrr, pref_at_1, mean_rank_pos, mean_rank_neg, both_top10,
#:  ties, fallback, delta_pts, delta_lo, delta_hi)
_ROWS = [
    ("fusion", 2736, 1431, 52.30, 147, 10.79, 0.5764, 33.59, 4.0, 4.2, 2547, None, None, None, None, None),
    ("e0", 2736, 1549, 56.62, None, None, 0.3055, None, 92.3, 106.6, 64, None, None, None, None, None),
    ("bg8", 2736, 1492, 54.53, None, None, 0.5859, None, 3.6, 3.9, 2609, 70, None, None, None, None),
    ("ce", 2736, None, 69.77, None, 43.36, 0.7404, None, None, None, None, None, 0, 17.47, 15.81, 19.05),
    ("grader", 2736, 2119, 77.45, 804, 58.99, 0.7509, 59.21, None, None, None, None, 78, 25.15, 23.54, 26.78),
    ("grader_e0", 2736, None, 78.47, None, None, 0.7148, None, None, None, None, None, None, None, None, None),
]
#: The paper's Test population (directions and complete pairs its pools covered).
PAPER_N, PAPER_PAIRS = 2736, 1363
COLUMNS = ("ranker", "n", "strict", "strict_pct", "paired", "paired_pct", "mrr", "pref_at_1", "mean_rank_pos",
           "mean_rank_neg", "both_top10", "ties", "fallback", "delta_pts", "delta_lo", "delta_hi")


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
    frame = pd.DataFrame(_ROWS, columns=list(COLUMNS)).astype({c: "Float64" for c in COLUMNS[1:]})
    frame.insert(0, "source", PAPER)
    frame["note"] = paper_note(run_n)
    return frame
