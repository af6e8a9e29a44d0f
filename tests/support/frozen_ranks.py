"""Real ranks for simulation tests: the frozen pools' fusion ranks of every eligible direction's designated pair
(``data/pools``), and a random window reranker of them (docs/protocol.md#window-rule). Simulations of the suite's
error rates draw on these instead of only the generators the code assumes (docs/statistics.md)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from fixtures.pools import FROZEN_DIR, load_pool_parquet
from rankers.fusion import fusion_ranking
from rankers.window import WINDOW_K


class Split:
    """One split's eligible directions with fusion's ranks of both designated passages (from the frozen pool)."""

    def __init__(self, study, name: str) -> None:
        directions = study.split(name)
        ranking = fusion_ranking(load_pool_parquet(FROZEN_DIR / f"{name}.parquet")).frame
        index = pd.MultiIndex.from_frame(ranking[["qid", "pid"]])
        pos, neg = (index.get_indexer(pd.MultiIndex.from_arrays([directions["qid"], directions[c].astype(str)]))
                    for c in ("preferred_pid", "counterpart_pid"))
        eligible = (pos >= 0) & (neg >= 0)
        self.directions = directions[eligible].reset_index(drop=True)
        pos, neg = pos[eligible], neg[eligible]
        rank, k0 = ranking["rank"].to_numpy(float), ranking["k0"].to_numpy(float)
        self.rank_pos, self.rank_neg = rank[pos], rank[neg]
        self.strict = (k0[pos] > k0[neg]).astype(float)
        self.head = np.minimum(WINDOW_K, ranking.groupby("qid").size().reindex(self.directions["qid"]).to_numpy())

    def random_window(self, rng: np.random.Generator, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(strict, 1 / rank of the preferred passage) of a random window reranker on the masked directions: fusion's
        top 20 in a random order, the tail in fusion's (docs/protocol.md#window-rule)."""
        in_pos, in_neg, head = self.rank_pos[mask] <= WINDOW_K, self.rank_neg[mask] <= WINDOW_K, self.head[mask]
        first = np.floor(rng.random(mask.sum()) * head) + 1
        second = np.floor(rng.random(mask.sum()) * (head - 1)) + 1
        second = np.where(second >= first, second + 1, second)
        rank_pos = np.where(in_pos, first, self.rank_pos[mask])
        rank_neg = np.where(in_neg, np.where(in_pos, second, first), self.rank_neg[mask])
        strict = np.where(in_pos & in_neg, rank_pos < rank_neg,
                          np.where(in_pos, 1.0, np.where(in_neg, 0.0, self.strict[mask])))
        return strict.astype(float), 1.0 / rank_pos

    def fusion(self, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.strict[mask], 1.0 / self.rank_pos[mask]
