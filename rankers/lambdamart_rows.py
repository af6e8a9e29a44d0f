"""Which rows enter a LambdaMART variant's loss (``docs/protocol.md#lambdamart``): the designated pair of each eligible
Train direction (E0), plus N background candidates drawn per query with a stable seed (``bg<N>``), each query
weighted so every source group weighs the same; and the development measure early stopping maximizes.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fixtures.populations import annotate_population, eligible_directions


def variant_name(n_background: int) -> str:
    """``e0`` for pair-only training, ``bg<N>`` for N background candidates per query."""
    check_background(n_background)
    return "e0" if n_background == 0 else f"bg{n_background}"


def check_background(n_background: object) -> None:
    if isinstance(n_background, bool) or not isinstance(n_background, int) or n_background < 0:
        raise ValueError(f"background must be an integer >= 0 (0 is E0), got {n_background!r}")


def labels(n_background: int) -> tuple[int, int, int | None]:
    """Labels of (preferred, counterpart, sampled background) rows; E0 has no background rows."""
    return (1, 0, None) if n_background == 0 else (2, 1, 0)


@dataclass(frozen=True)
class TrainingSet:
    """Rows entering the loss, grouped by query (contiguous, passage-id order within a query)."""

    features: np.ndarray
    labels: np.ndarray
    weights: np.ndarray
    group_sizes: np.ndarray
    qids: np.ndarray
    pids: np.ndarray
    background: dict[str, dict[str, object]]


def usable_directions(pool: pd.DataFrame, directions: pd.DataFrame) -> pd.DataFrame:
    """Q_c of a training or development split: its eligible directions over ``pool``."""
    return eligible_directions(annotate_population(directions, pool)).reset_index(drop=True)


def source_weights(groups: pd.Series) -> np.ndarray:
    """Per-query weight giving each source group equal total weight; weights average 1 over queries."""
    sizes = groups.map(groups.value_counts()).to_numpy(dtype=np.float64)
    return len(groups) / (groups.nunique() * sizes)


def background_seed(base_seed: int, qid: str) -> int:
    """Stable per-query seed: sha256 of base seed and qid, independent of query order or process."""
    return int.from_bytes(hashlib.sha256(f"{base_seed}:{qid}".encode()).digest()[:8], "big")


def background_key(seed: int, pid: str) -> bytes:
    """A candidate's place in its query's seeded random order: sha256 of the query's seed and the passage id."""
    return hashlib.sha256(f"{seed}:{pid}".encode()).digest()


def sample_background(pool: pd.DataFrame, directions: pd.DataFrame, base_seed: int,
                      n: int) -> dict[str, dict[str, object]]:
    """Per eligible qid: its seed and up to ``n`` pool pids outside the designated pair, without replacement.

    Each candidate's key is a hash of the query's seed and its own passage id, and the ``n``
    smallest keys are taken: a uniform sample without replacement in which a candidate's
    selection depends on the other candidates only through their keys. A pool that differs by
    one tail passage (a near-tie at a route's depth on another machine) therefore changes this
    query's sample only when that passage's key is among the ``n`` smallest, instead of
    reshuffling every draw as an index into the candidate list would.
    """
    members = pool.groupby("qid", sort=False)["pid"].agg(list)
    out: dict[str, dict[str, object]] = {}
    for qid, pos, neg in zip(directions["qid"], directions["preferred_pid"], directions["counterpart_pid"]):
        seed = background_seed(base_seed, qid)
        candidates = sorted((p for p in members[qid] if p != pos and p != neg), key=lambda p: background_key(seed, p))
        out[qid] = {"seed": seed, "pids": sorted(candidates[:n])}
    return out


def row_index(pool: pd.DataFrame, qids: np.ndarray, pids: np.ndarray) -> np.ndarray:
    index = pd.MultiIndex.from_arrays([pool["qid"], pool["pid"]])
    rows = index.get_indexer(pd.MultiIndex.from_arrays([qids, pids]))
    if (rows < 0).any():
        i = int(np.flatnonzero(rows < 0)[0])
        raise KeyError(f"({qids[i]!r}, {pids[i]!r}) is not a pool row")
    return rows


def training_set(n_background: int, pool: pd.DataFrame, features: np.ndarray, directions: pd.DataFrame,
                 seed: int) -> TrainingSet:
    """Loss rows of eligible directions: the designated pair (E0) or pair plus ``n_background`` sampled ones."""
    name = variant_name(n_background)
    elig = usable_directions(pool, directions)
    if elig.empty:
        raise ValueError(f"{name}: no usable training query: none of the {len(directions)} directions has both "
                         "designated passages in its pool without being a structural conflict")
    preferred, counterpart, background_label = labels(n_background)
    rows = [pd.DataFrame({"qid": elig["qid"], "pid": elig["preferred_pid"], "label": preferred}),
            pd.DataFrame({"qid": elig["qid"], "pid": elig["counterpart_pid"], "label": counterpart})]
    background: dict[str, dict[str, object]] = {}
    if n_background:
        background = sample_background(pool, elig, seed, n_background)
        bq = [q for q, b in background.items() for _ in b["pids"]]  # type: ignore[union-attr]
        bp = [p for b in background.values() for p in b["pids"]]  # type: ignore[union-attr]
        rows.append(pd.DataFrame({"qid": bq, "pid": bp, "label": background_label}))
    frame = pd.concat(rows, ignore_index=True).sort_values(["qid", "pid"], kind="mergesort").reset_index(drop=True)
    weight_of = pd.Series(source_weights(elig["group"]), index=elig["qid"].to_numpy())
    qids, pids = frame["qid"].to_numpy(), frame["pid"].to_numpy()
    sizes = frame.groupby("qid", sort=False).size().to_numpy()
    return TrainingSet(features=features[row_index(pool, qids, pids)], labels=frame["label"].to_numpy(np.float64),
                       weights=weight_of.loc[qids].to_numpy(np.float64), group_sizes=sizes, qids=qids, pids=pids,
                       background=background)


def strict_by_groups(preferred: np.ndarray, counterpart: np.ndarray, groups: np.ndarray) -> float:
    """Strict preference (score(preferred) > score(counterpart); ties fail) averaged within, then across, groups."""
    codes, uniques = pd.factorize(groups)
    strict = (np.asarray(preferred) > np.asarray(counterpart)).astype(np.float64)
    per_group = np.bincount(codes, weights=strict, minlength=len(uniques)) / np.bincount(codes, minlength=len(uniques))
    return float(per_group.mean())
