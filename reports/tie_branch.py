"""Tie-branch analysis of a window reranker (docs/protocol.md#ties, paper §VI).

Where both designated passages are in the scored window, equal text scores leave
the decision to the tie-breaker (fusion): this branch's share of the remaining
failures, against its share of directions, is what H3 is about.

Every row of ``tie_branch.csv`` states its denominators: ``directions_pct`` is a share of
``of_directions`` (the ranker's whole population, on every row) and ``non_successes_pct`` a
share of ``of_non_successes`` (the row's scorer's non-successes over that population);
``parent`` names the branch a row splits further ("" for the three branches themselves).
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

BRANCHES = ("equal_score", "different_score", "outside_window_or_fallback")


def tie_branches(eligible: pd.DataFrame, outcomes: pd.DataFrame, reference_ranks: pd.DataFrame,
                 text_scores: Mapping[tuple[str, str], float], fallback: frozenset[str], k: int) -> pd.DataFrame:
    """Per eligible direction: its branch and whether both designated passages got the maximum grade.

    ``reference_ranks`` is the reference ranking's frame (qid, pid, rank) that defined the window.
    """
    ranks = reference_ranks.set_index(["qid", "pid"])["rank"]
    qid = eligible["qid"].to_numpy()
    pos_idx = pd.MultiIndex.from_arrays([qid, eligible["preferred_pid"].to_numpy()])
    neg_idx = pd.MultiIndex.from_arrays([qid, eligible["counterpart_pid"].to_numpy()])
    in_window = (ranks.reindex(pos_idx).to_numpy() <= k) & (ranks.reindex(neg_idx).to_numpy() <= k)
    scores = pd.Series(text_scores, dtype=float)
    s_pos = scores.reindex(pos_idx).to_numpy(dtype=float) if len(scores) else np.full(len(qid), np.nan)
    s_neg = scores.reindex(neg_idx).to_numpy(dtype=float) if len(scores) else np.full(len(qid), np.nan)
    scored = in_window & ~np.isin(qid, list(fallback)) & np.isfinite(s_pos) & np.isfinite(s_neg)
    branch = np.where(~scored, BRANCHES[2], np.where(s_pos == s_neg, BRANCHES[0], BRANCHES[1]))
    strict = outcomes.set_index("qid")["strict"].reindex(qid).to_numpy(dtype=bool)
    return pd.DataFrame({"qid": qid, "branch": branch, "strict": strict, "s_pos": s_pos, "s_neg": s_neg})


def tie_branch_table(per_direction: pd.DataFrame, scorer: str, max_score: float | None) -> list[dict[str, object]]:
    """Rows of tie_branch.csv: each branch's share of directions and of non-successes, and double-max counts."""
    n = len(per_direction)
    failures = int((~per_direction["strict"]).sum())
    rows = []
    for branch in BRANCHES:
        part = per_direction[per_direction["branch"] == branch]
        non = int((~part["strict"]).sum())
        if max_score is not None and branch == BRANCHES[0]:
            double_max = int(((part["s_pos"] == max_score) & (part["s_neg"] == max_score)).sum())
        else:
            double_max = None
        rows.append({
            "scorer": scorer,
            "branch": branch,
            "parent": "",
            "directions": len(part),
            "of_directions": n,
            "directions_pct": 100.0 * len(part) / n if n else float("nan"),
            "non_successes": non,
            "of_non_successes": failures,
            "non_successes_pct": 100.0 * non / failures if failures else float("nan"),
            "accuracy_pct": 100.0 * part["strict"].mean() if len(part) else float("nan"),
            "tie_break_accuracy_pct": float("nan"),
            "double_max": double_max,
            "double_max_pct": (100.0 * double_max / len(part)) if double_max is not None and len(part) else None,
        })
    return rows


def expected_grade_splits(per_direction: pd.DataFrame, e_pos: np.ndarray, e_neg: np.ndarray) -> dict[str, object]:
    """Beyond the paper: what the expected grade E[g] does with the argmax grader's equal-grade directions.

    ``per_direction`` is the argmax ranker's ``tie_branches`` frame; ``e_pos``/``e_neg`` the expected
    grades of its directions' preferred and counterpart passages (aligned, NaN when absent). Among
    the equal-grade directions: how many E[g] splits (unequal expected grades), how many of those it
    splits the right way (preferred higher), and how often fusion's tie-break was right on the same ones.
    """
    tied = (per_direction["branch"] == BRANCHES[0]).to_numpy()
    e_pos, e_neg = np.asarray(e_pos, dtype=float), np.asarray(e_neg, dtype=float)
    split = tied & np.isfinite(e_pos) & np.isfinite(e_neg) & (e_pos != e_neg)
    fusion_right = per_direction["strict"].to_numpy(dtype=bool)
    return {"argmax_ties": int(tied.sum()), "split": int(split.sum()), "split_right": int((split & (e_pos > e_neg)).sum()),
            "fusion_right_on_split": int((split & fusion_right).sum()),
            "still_tied": int((tied & ~split).sum()), "fusion_right_on_still_tied": int((tied & ~split & fusion_right).sum())}


def expected_grade_rows(counts: dict[str, object], scorer: str, of_directions: int,
                        of_non_successes: int) -> list[dict[str, object]]:
    """Beyond the paper: the argmax twin's equal-grade branch split by the expected grade, as tie_branch.csv rows.

    ``counts`` is ``expected_grade_splits``'s; ``of_directions`` the population both rankers
    share and ``of_non_successes`` the expected-grade ranker's non-successes over it, so the
    shares read like the branch rows. ``accuracy_pct`` is the expected-grade rule's,
    ``tie_break_accuracy_pct`` the argmax ranker's tie-break on the same directions.
    """
    rows = []
    for branch, n, right, tie_break_right in (
            ("argmax_tie_split_by_expected", counts["split"], counts["split_right"], counts["fusion_right_on_split"]),
            ("argmax_tie_still_tied", counts["still_tied"], counts["fusion_right_on_still_tied"],
             counts["fusion_right_on_still_tied"])):
        non = int(n) - int(right)
        rows.append({
            "scorer": scorer, "branch": branch, "parent": BRANCHES[0], "directions": int(n),
            "of_directions": of_directions,
            "directions_pct": 100.0 * n / of_directions if of_directions else float("nan"),
            "non_successes": non, "of_non_successes": of_non_successes,
            "non_successes_pct": 100.0 * non / of_non_successes if of_non_successes else float("nan"),
            "accuracy_pct": 100.0 * right / n if n else float("nan"),
            "tie_break_accuracy_pct": 100.0 * tie_break_right / n if n else float("nan"),
            "double_max": None, "double_max_pct": None})
    return rows
