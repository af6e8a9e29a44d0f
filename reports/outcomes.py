"""Per-direction outcomes of a ranking over Q_c (docs/protocol.md#measures): computed once per ranking, so strict
preference, ties, ranks, every Table II measure and the bootstrap all read the same numbers.

Strict preference compares the ranker's ordered keys (k0, k1, k2) lexicographically. Equal keys are ties and ties
are failures: list positions break ties by passage id, but a position never creates a success. The outcomes of two
rankers are compared only on the same directions, aligned here.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from fixtures.populations import eligible_directions
from rankers.base import KEY_COLUMNS, Ranking, strictly_greater

OUTCOME_COLUMNS = ("qid", "rank_pos", "rank_neg", "strict", "tie", "fallback")


def direction_outcomes(ranking: Ranking, directions_annotated: pd.DataFrame) -> pd.DataFrame:
    """Per eligible direction: full-pool ranks of both designated passages, strict, tie, fallback.

    Rows follow the order of the eligible directions; ``attrs["ranker"]`` carries the
    ranking's name for ``summarize``.
    """
    q = eligible_directions(directions_annotated)
    frame = ranking.frame
    index = pd.MultiIndex.from_arrays([frame["qid"].astype(str), frame["pid"].astype(str)])
    qid = q["qid"].astype(str).to_numpy()
    pos = index.get_indexer(pd.MultiIndex.from_arrays([qid, q["preferred_pid"].astype(str).to_numpy()]))
    neg = index.get_indexer(pd.MultiIndex.from_arrays([qid, q["counterpart_pid"].astype(str).to_numpy()]))
    missing = (pos < 0) | (neg < 0)
    if missing.any():
        bad = [f"{qid[i]} (preferred {q['preferred_pid'].iat[i]})" if pos[i] < 0 else f"{qid[i]} (counterpart {q['counterpart_pid'].iat[i]})"
               for i in np.flatnonzero(missing)[:5]]
        raise ValueError(f"ranking {ranking.name!r} lacks a designated passage of {int(missing.sum())} eligible "
                         f"direction(s), e.g. qid {', '.join(bad)}; every ranker must order the full pool")
    keys = frame[list(KEY_COLUMNS)].to_numpy(dtype=float)
    kp, kn = keys[pos], keys[neg]
    strict = strictly_greater(kp, kn)
    ranks = frame["rank"].to_numpy()
    out = pd.DataFrame({
        "qid": qid,
        "rank_pos": ranks[pos].astype(np.int64),
        "rank_neg": ranks[neg].astype(np.int64),
        "strict": strict,
        "tie": (kp == kn).all(axis=1),
        "fallback": np.isin(qid, np.fromiter(ranking.fallback, dtype=object, count=len(ranking.fallback))),
    })
    out.attrs["ranker"] = ranking.name
    return out


def seed_average(by_seed: list[pd.DataFrame]) -> pd.DataFrame:
    """Outcomes averaged over training seeds, direction by direction (``docs/statistics.md#seeds``).

    strict, tie and fallback become the share of seeds with that outcome; ``rank_pos`` and
    ``rank_neg`` become harmonic means, so that 1/rank, and with it MRR, is the seed average of
    each seed's reciprocal rank. Every seed must cover the same directions.
    """
    first = by_seed[0]
    qids = pd.Index(first["qid"])
    aligned = []
    for i, frame in enumerate(by_seed):
        where = qids.get_indexer(frame["qid"])
        if len(frame) != len(first) or (where < 0).any():
            raise ValueError(f"seed {i} covers other directions than seed 0 ({len(frame)} vs {len(first)})")
        aligned.append(frame.iloc[np.argsort(where)].reset_index(drop=True))
    out = pd.DataFrame({"qid": first["qid"].to_numpy()})
    for column in ("strict", "tie", "fallback"):
        out[column] = np.mean([f[column].to_numpy(dtype=float) for f in aligned], axis=0)
    for column in ("rank_pos", "rank_neg"):
        values = [pd.to_numeric(f[column]).to_numpy(dtype=float, na_value=np.nan) for f in aligned]
        out[column] = 1.0 / np.mean([1.0 / v for v in values], axis=0)
    out.attrs["ranker"] = first.attrs.get("ranker")
    out.attrs["seeds"] = len(by_seed)
    return out


def _positions(index: pd.Index, qids: pd.Series | np.ndarray, what: str) -> np.ndarray:
    """Row positions of ``qids`` in a unique qid ``index`` (-1 where absent); hashing, not per-element ``isin``."""
    if not index.is_unique:
        raise ValueError(f"{what} repeat qids, e.g. {index[index.duplicated()][:3].tolist()}")
    return index.get_indexer(qids)


def aligned_population(outcomes: pd.DataFrame, directions_annotated: pd.DataFrame) -> pd.DataFrame:
    """Eligible directions in outcome order; fails when the outcomes are not exactly Q_c of their split(s)."""
    missing_cols = [c for c in OUTCOME_COLUMNS if c not in outcomes.columns]
    if missing_cols:
        raise ValueError(f"outcomes lack columns {missing_cols}")
    given = pd.Index(outcomes["qid"])
    if not given.is_unique:
        raise ValueError(f"outcomes repeat qids, e.g. {given[given.duplicated()][:3].tolist()}")
    q = eligible_directions(directions_annotated)
    where = _positions(pd.Index(q["qid"]), given, "eligible directions")
    if (where < 0).any():
        raise ValueError(f"outcomes hold qids outside Q_c, e.g. {given[where < 0][:3].tolist()}")
    aligned = q.iloc[where]
    expected = q[pd.Index(aligned["split"].unique()).get_indexer(q["split"]) >= 0]
    absent = given.get_indexer(expected["qid"]) < 0
    if absent.any():
        raise ValueError(f"outcomes miss {int(absent.sum())} eligible direction(s), e.g. {expected['qid'][absent].head(3).tolist()}")
    return aligned.reset_index(drop=True)


def outcome_columns(outcomes: pd.DataFrame, what: str = "outcomes") -> dict[str, np.ndarray]:
    """Per-direction float arrays n, strict, tie, fallback, and rank_pos/rank_neg when the ranker has ranks.

    Ranks are all present (a full-pool ranker) or all NA (a ranker scored on its
    designated pair only, whose rank keys are then absent); a mix is an error.
    """
    cols = {"n": np.ones(len(outcomes))}
    for name in ("strict", "tie", "fallback"):
        values = pd.Series(outcomes[name]).to_numpy(dtype=float, na_value=np.nan)
        if np.isnan(values).any():
            raise ValueError(f"{what}: {name!r} is missing for {int(np.isnan(values).sum())} direction(s), e.g. qid "
                             f"{outcomes['qid'].to_numpy()[np.isnan(values)][:3].tolist()}")
        cols[name] = values
    ranks = {name: pd.to_numeric(outcomes[name]).to_numpy(dtype=float, na_value=np.nan) for name in ("rank_pos", "rank_neg")}
    absent = np.isnan(ranks["rank_pos"]) | np.isnan(ranks["rank_neg"])
    if absent.all() and len(outcomes):
        return cols
    if absent.any():
        raise ValueError(f"{what}: full-pool ranks are missing for {int(absent.sum())} of {len(outcomes)} directions, "
                         f"e.g. qid {outcomes['qid'].to_numpy()[absent][:3].tolist()}; ranks must be all present or all NA")
    return cols | ranks


def baseline_columns(outcomes: pd.DataFrame, baseline: pd.DataFrame) -> dict[str, np.ndarray]:
    """The baseline ranker's ``outcome_columns`` in ``outcomes``' direction order; fails on another Q_c."""
    where = _positions(pd.Index(baseline["qid"]), outcomes["qid"], "baseline outcomes")
    if (where < 0).any() or len(baseline) != len(outcomes):
        raise ValueError(f"baseline outcomes cover a different Q_c (e.g. missing {outcomes['qid'][where < 0].head(3).tolist()}; "
                         f"{len(baseline)} vs {len(outcomes)} directions)")
    return outcome_columns(baseline.iloc[where], "baseline outcomes")


def corrections_regressions(outcomes: pd.DataFrame, baseline: pd.DataFrame, directions_annotated: pd.DataFrame,
                            groups: str = "group") -> dict[str, int]:
    """Directions the ranker fixes / breaks relative to its baseline, and groups by sign of net gain.

    Net gain of a group = its corrections minus its regressions; every group with an
    eligible direction is counted once, in exactly one of positive/zero/negative.
    """
    dirs = aligned_population(outcomes, directions_annotated)
    ours = outcome_columns(outcomes)["strict"].astype(bool)
    ref = baseline_columns(outcomes, baseline)["strict"].astype(bool)
    gain = pd.Series(ours.astype(int) - ref.astype(int)).groupby(dirs[groups].to_numpy()).sum()
    return {
        "corrections": int((ours & ~ref).sum()),
        "regressions": int((~ours & ref).sum()),
        "groups_positive": int((gain > 0).sum()),
        "groups_zero": int((gain == 0).sum()),
        "groups_negative": int((gain < 0).sum()),
    }
