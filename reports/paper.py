"""The paper's published Table II values, as a labeled reference beside a run (never mixed into its rows).

Source: *Preference Is Not Position: Evaluating Reranking on NevIR in Fixed Hybrid Candidate
Pools*, Section V (Test, n = 2,736 covered directions, 1,363 complete pairs; GPU/API models).
Only numbers the text states are here; the rest are NA. Row names follow this suite's
embedded profile (ce: BGE-reranker-v2-m3 window; grader: Qwen3-14B-AWQ window).
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
    ("ce", 2736, None, 69.77, None, 43.36, None, None, None, None, None, None, 0, 17.47, 15.81, 19.05),
    ("grader", 2736, 2119, 77.45, 804, 58.99, 0.7509, 59.21, None, None, None, None, 78, 25.15, 23.54, 26.78),
]
COLUMNS = ("ranker", "n", "strict", "strict_pct", "paired", "paired_pct", "mrr", "pref_at_1", "mean_rank_pos",
           "mean_rank_neg", "both_top10", "ties", "fallback", "delta_pts", "delta_lo", "delta_hi")


def paper_table2(split: str) -> pd.DataFrame | None:
    """The published Test rows (None for other splits: the paper's confirmation numbers are partial)."""
    if split != "test":
        return None
    frame = pd.DataFrame(_ROWS, columns=list(COLUMNS)).astype({c: "Float64" for c in COLUMNS[1:]})
    frame.insert(0, "source", PAPER)
    return frame
