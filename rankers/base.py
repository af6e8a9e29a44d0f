"""The ranking record every ranker returns and every measure reads.

A ranking orders each query's full pool (``rank``, 1-based, the list position) and
carries the strict-comparison key ``(k0, k1, k2)`` compared lexicographically
(``docs/protocol.md#ties``). Keeping keys apart from positions is what lets identifier
tie-breaking set positions without ever creating a strict success.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

KEY_COLUMNS = ("k0", "k1", "k2")
RANKING_COLUMNS = ("qid", "pid", "rank", *KEY_COLUMNS)


@dataclass(frozen=True)
class Ranking:
    """One ranker's output over a split's pools.

    ``frame`` has one row per (qid, pid) of the pool with columns qid, pid, rank,
    k0, k1, k2; ``fallback`` lists queries restored to the reference order because
    a score was unavailable.
    """

    name: str
    frame: pd.DataFrame
    fallback: frozenset[str] = field(default_factory=frozenset)
    info: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        missing = [c for c in RANKING_COLUMNS if c not in self.frame.columns]
        if missing:
            raise ValueError(f"ranking {self.name!r} lacks columns {missing}")
        keys = self.frame[list(KEY_COLUMNS)].to_numpy(dtype=float)
        if not np.isfinite(keys).all():
            bad = self.frame.loc[~np.isfinite(keys).all(axis=1), ["qid", "pid"]].head(3).to_dict("records")
            raise ValueError(f"ranking {self.name!r} has non-finite keys, e.g. {bad}")
        if self.frame.duplicated(["qid", "pid"]).any():
            dup = self.frame.loc[self.frame.duplicated(["qid", "pid"]), ["qid", "pid"]].head(3).to_dict("records")
            raise ValueError(f"ranking {self.name!r} has duplicate (qid, pid) rows, e.g. {dup}")


def strictly_greater(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise lexicographic ``a > b`` over (k0, k1, k2) key rows: the one strict comparison.

    Equal keys are ties, and a tie is never a success; list positions play no part.
    """
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    gt, eq = a > b, a == b
    return gt[:, 0] | (eq[:, 0] & gt[:, 1]) | (eq[:, 0] & eq[:, 1] & gt[:, 2])


def rank_by_keys(frame: pd.DataFrame, name: str, fallback: frozenset[str] = frozenset(), **info: object) -> Ranking:
    """Order each query's rows by keys descending, then passage id ascending (pyserini-style determinism)."""
    ordered = frame.sort_values(["qid", *KEY_COLUMNS, "pid"], ascending=[True, False, False, False, True], kind="mergesort")
    ordered = ordered.reset_index(drop=True)
    ordered["rank"] = ordered.groupby("qid", sort=False).cumcount() + 1
    return Ranking(name, ordered[list(RANKING_COLUMNS)], fallback, dict(info))


def single_score_ranking(pool: pd.DataFrame, scores: np.ndarray, name: str, **info: object) -> Ranking:
    """Ranking for a ranker with one real-valued score per pool row: key (score, 0, 0)."""
    scores = np.asarray(scores, dtype=float)
    if scores.shape != (len(pool),):
        raise ValueError(f"{name}: expected {len(pool)} scores, got shape {scores.shape}")
    if not np.isfinite(scores).all():
        bad = pool.loc[~np.isfinite(scores), ["qid", "pid"]].head(3).to_dict("records")
        raise ValueError(f"{name}: non-finite scores, e.g. {bad}")
    frame = pd.DataFrame({"qid": pool["qid"].to_numpy(), "pid": pool["pid"].to_numpy(), "k0": scores, "k1": 0.0, "k2": 0.0})
    return rank_by_keys(frame, name, **info)
