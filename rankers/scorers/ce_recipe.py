"""What a cross-encoder training run is made of: its recipe and its Train groups (``docs/protocol.md#cross-encoder``).

The recipe holds everything about training that changes the weights, so it enters the trained model's cache
identity; the groups are the Train directions with the background passages their fixed Train pools offer.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fixtures.identity import text_digest
from fixtures.study import Study
from rankers.fusion import fusion_scores
from rankers.window import WINDOW_K


@dataclass(frozen=True)
class Recipe:
    """Everything about training that changes the weights (it enters the cache identity)."""

    max_length: int = 352  # inference: covers the longest NevIR query + passage (342 tokens), so nothing truncates
    train_max_length: int = 256  # training: 96.5% of inputs fit; the tail is clipped to save time
    negatives: int = 4  # background candidates per group, besides the counterpart
    negative_depth: int = WINDOW_K  # background drawn from the query's fusion top-N of its Train pool
    queries_per_step: int = 8
    lr: float = 4e-4
    pair_weight: float = 1.0  # weight of the pairwise -log sigmoid(s_preferred - s_counterpart) term
    weight_decay: float = 0.01
    warmup_frac: float = 0.06
    max_steps: int = 500
    eval_every: int = 50
    # Evaluations without improvement before stopping. 2: on the full budget the selected checkpoint (step 250; the
    # evaluations at 300 and 350 are both lower) and so the weights are those patience 3 and 6 select, and stopping
    # at 350 instead of 400 (patience 3) or 500 (6) saves 50-150 steps of ~0.65 s each (measured).
    patience: int = 2
    max_train_queries: int | None = None  # a seeded subset of Train directions (CI budget)
    threads: int = 2


#: Named budgets: "full" for the main evaluation, "ci" for a subset run of a minute or two.
BUDGETS = {
    "full": Recipe(),
    "ci": Recipe(max_steps=60, eval_every=20, patience=2, max_train_queries=240),
}


@dataclass(frozen=True)
class TrainGroups:
    """Per Train direction: query text, preferred, counterpart and the background candidates to sample from."""

    pair_ids: list[str]
    queries: list[str]
    preferred: list[str]
    counterpart: list[str]
    background: list[list[str]]  # pids, in fusion order
    corpus: dict[str, str]

    def digest(self) -> str:
        h = hashlib.sha256()
        for q, p, c, bg in zip(self.queries, self.preferred, self.counterpart, self.background):
            h.update(json.dumps([text_digest(q), p, c, bg]).encode())
        for pid in sorted(set(self.preferred) | set(self.counterpart) | {b for bg in self.background for b in bg}):
            h.update(text_digest(self.corpus[pid]).encode())
        return h.hexdigest()


def train_groups(study: Study, pool: pd.DataFrame, recipe: Recipe, seed: int) -> TrainGroups:
    """Training groups from Train directions (conflicts excluded) and their pools' fusion heads.

    The text scorer needs no pool to see the designated pair, so a Train direction
    whose pair the pool missed still trains; its background then comes from whatever
    its pool holds.
    """
    directions = study.split("train")
    directions = directions[~directions["conflict"].astype(bool)].reset_index(drop=True)
    if recipe.max_train_queries is not None and recipe.max_train_queries < len(directions):
        keep = np.sort(np.random.default_rng([seed, 1]).choice(len(directions), recipe.max_train_queries, replace=False))
        directions = directions.iloc[keep].reset_index(drop=True)
    pool = pool[pool["qid"].isin(directions["qid"])]
    ordered = pool.assign(_f=fusion_scores(pool)).sort_values(["qid", "_f", "pid"], ascending=[True, False, True])
    heads = ordered.groupby("qid", sort=False)["pid"].apply(list).to_dict()
    background = []
    for row in directions.itertuples(index=False):
        cands = [p for p in heads.get(row.qid, []) if p not in (row.preferred_pid, row.counterpart_pid)]
        background.append(cands[:recipe.negative_depth])
    return TrainGroups(directions["pair_id"].tolist(), directions["query"].tolist(), directions["preferred_pid"].tolist(),
                       directions["counterpart_pid"].tolist(), background, study.corpus_for("train"))
