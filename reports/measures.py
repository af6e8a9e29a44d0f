"""Preference and position measures over Q_c (SPEC §4), defined apart from their computation.

In the spirit of ir_measures, each Table II column is a small typed record saying
what it measures and how it aggregates; ``summarize`` is the one evaluator that
applies them. Per-direction outcomes are computed once per ranking
(``direction_outcomes``), so strict preference, ties, ranks and the bootstrap all
read the same numbers.

Strict preference compares the ranker's ordered keys (k0, k1, k2)
lexicographically. Equal keys are ties and ties are failures: list positions break
ties by passage id, but a position never creates a success.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from fixtures.populations import eligible_directions
from fixtures.settings import SEED
from rankers.base import KEY_COLUMNS, Ranking, strictly_greater
from reports.bootstrap import N_RESAMPLES, group_bootstrap_delta

OUTCOME_COLUMNS = ("qid", "rank_pos", "rank_neg", "strict", "tie", "fallback")

Aggregate = Literal["count", "pct", "mean"]


@dataclass(frozen=True)
class DirectionMeasure:
    """A Table II column aggregating one per-direction value over Q_c.

    ``count`` sums the value, ``pct`` is 100 × its mean, ``mean`` its mean.
    """

    name: str
    value: Callable[[pd.DataFrame], np.ndarray]
    aggregate: Aggregate
    doc: str


@dataclass(frozen=True)
class PairMeasure:
    """A column over complete pairs (both directions eligible), NevIR's paired aggregation."""

    name: str
    doc: str


@dataclass(frozen=True)
class ReferenceMeasure:
    """A column comparing the ranker with a reference ranker over the same Q_c."""

    name: str
    doc: str


def _col(name: str) -> Callable[[pd.DataFrame], np.ndarray]:
    return lambda o: o[name].to_numpy(dtype=float)


def _pref_at(k: int) -> DirectionMeasure:
    return DirectionMeasure(f"pref_at_{k}", lambda o: (o["rank_pos"].to_numpy() <= k).astype(float), "pct",
                            f"% of Q_c with the preferred passage at full-pool rank <= {k}")


DIRECTION_MEASURES: tuple[DirectionMeasure, ...] = (
    DirectionMeasure("n", lambda o: np.ones(len(o)), "count", "directions in Q_c"),
    DirectionMeasure("strict", _col("strict"), "count", "directions whose preferred key is strictly greater"),
    DirectionMeasure("strict_pct", _col("strict"), "pct", "strict preference, % of Q_c"),
    DirectionMeasure("mrr", lambda o: 1.0 / o["rank_pos"].to_numpy(dtype=float), "mean", "preferred-passage MRR over the full pool"),
    _pref_at(1),
    _pref_at(3),
    _pref_at(10),
    DirectionMeasure("mean_rank_pos", _col("rank_pos"), "mean", "mean full-pool rank of the preferred passage"),
    DirectionMeasure("mean_rank_neg", _col("rank_neg"), "mean", "mean full-pool rank of the counterpart passage"),
    DirectionMeasure("both_top10", lambda o: ((o["rank_pos"] <= 10) & (o["rank_neg"] <= 10)).to_numpy(dtype=float), "count",
                     "directions with both designated passages in the top 10"),
    DirectionMeasure("ties", _col("tie"), "count", "directions whose two designated keys are equal (failures)"),
    DirectionMeasure("fallback", _col("fallback"), "count", "directions restored to the reference order"),
)
PAIR_MEASURES: tuple[PairMeasure, ...] = (
    PairMeasure("paired", "complete pairs strict in both directions"),
    PairMeasure("paired_n", "complete pairs"),
    PairMeasure("paired_pct", "paired accuracy, % of complete pairs"),
)
REFERENCE_MEASURES: tuple[ReferenceMeasure, ...] = (
    ReferenceMeasure("delta_pts", "strict_pct minus the reference's, in points"),
    ReferenceMeasure("delta_lo", "lower end of the 95% source-group bootstrap interval of delta_pts"),
    ReferenceMeasure("delta_hi", "upper end of the 95% source-group bootstrap interval of delta_pts"),
)
#: Table II column order (SPEC §5).
TABLE2_COLUMNS: tuple[str, ...] = (
    "ranker", "n", "strict", "strict_pct", "paired", "paired_n", "paired_pct", "mrr", "pref_at_1", "pref_at_3",
    "pref_at_10", "mean_rank_pos", "mean_rank_neg", "both_top10", "ties", "fallback", "delta_pts", "delta_lo", "delta_hi",
)


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


def _aligned_population(outcomes: pd.DataFrame, directions_annotated: pd.DataFrame) -> pd.DataFrame:
    """Eligible directions in outcome order; fails when the outcomes are not exactly Q_c of their split(s)."""
    missing_cols = [c for c in OUTCOME_COLUMNS if c not in outcomes.columns]
    if missing_cols:
        raise ValueError(f"outcomes lack columns {missing_cols}")
    if outcomes["qid"].duplicated().any():
        raise ValueError(f"outcomes repeat qids, e.g. {outcomes.loc[outcomes['qid'].duplicated(), 'qid'].head(3).tolist()}")
    q = eligible_directions(directions_annotated).set_index("qid", drop=False)
    unknown = ~outcomes["qid"].isin(q.index)
    if unknown.any():
        raise ValueError(f"outcomes hold qids outside Q_c, e.g. {outcomes.loc[unknown, 'qid'].head(3).tolist()}")
    aligned = q.loc[outcomes["qid"].to_numpy()]
    expected = q[q["split"].isin(aligned["split"].unique())]
    absent = ~expected["qid"].isin(outcomes["qid"])
    if absent.any():
        raise ValueError(f"outcomes miss {int(absent.sum())} eligible direction(s), e.g. {expected.loc[absent, 'qid'].head(3).tolist()}")
    return aligned.reset_index(drop=True)


def _reference_strict(outcomes: pd.DataFrame, reference: pd.DataFrame) -> np.ndarray:
    ref = reference.set_index("qid")["strict"]
    missing = ~outcomes["qid"].isin(ref.index)
    if missing.any() or len(ref) != len(outcomes):
        raise ValueError(f"reference outcomes cover a different Q_c (e.g. missing {outcomes.loc[missing, 'qid'].head(3).tolist()}; "
                         f"{len(ref)} vs {len(outcomes)} directions)")
    return ref.loc[outcomes["qid"].to_numpy()].to_numpy(dtype=float)


def _aggregate(values: np.ndarray, how: Aggregate) -> float | int:
    if how == "count":
        return int(values.sum())
    if len(values) == 0:
        return float("nan")
    return float(values.mean() * (100.0 if how == "pct" else 1.0))


def summarize(outcomes: pd.DataFrame, directions_annotated: pd.DataFrame, reference: pd.DataFrame | None = None,
              groups: str = "group", n_resamples: int = N_RESAMPLES, seed: int = SEED,
              ranker: str | None = None) -> dict[str, object]:
    """One Table II row (keys exactly ``TABLE2_COLUMNS``).

    ``reference`` holds the reference ranker's outcomes over the same Q_c; the delta
    columns are NaN without one or for the reference itself. ``groups`` names the
    directions column used as bootstrap unit (``group``, or ``group_rules`` for the
    sensitivity check).
    """
    name = ranker if ranker is not None else outcomes.attrs.get("ranker")
    if name is None:
        raise ValueError("summarize needs a ranker name: pass ranker= or outcomes from direction_outcomes")
    dirs = _aligned_population(outcomes, directions_annotated)
    row: dict[str, object] = {"ranker": name}
    row.update({m.name: _aggregate(m.value(outcomes), m.aggregate) for m in DIRECTION_MEASURES})

    complete = dirs["complete"].to_numpy(dtype=bool)
    pairs = dirs.loc[complete, ["split", "pair_id"]].reset_index(drop=True)
    both = pd.Series(outcomes["strict"].to_numpy(dtype=int)[complete]).groupby([pairs["split"], pairs["pair_id"]]).sum()
    row["paired"] = int((both == 2).sum())
    row["paired_n"] = int(len(both))
    row["paired_pct"] = 100.0 * row["paired"] / row["paired_n"] if row["paired_n"] else float("nan")

    row["delta_pts"] = row["delta_lo"] = row["delta_hi"] = float("nan")
    if reference is not None and reference is not outcomes and reference.attrs.get("ranker", object()) != name:
        if groups not in dirs.columns:
            raise ValueError(f"directions frame has no bootstrap group column {groups!r}")
        ci = group_bootstrap_delta(outcomes["strict"].to_numpy(dtype=float), _reference_strict(outcomes, reference),
                                   dirs[groups].to_numpy(), n_resamples=n_resamples, seed=seed)
        row["delta_pts"], row["delta_lo"], row["delta_hi"] = 100 * ci.point, 100 * ci.lo, 100 * ci.hi
    return {c: row[c] for c in TABLE2_COLUMNS}


def corrections_regressions(outcomes: pd.DataFrame, reference: pd.DataFrame, directions_annotated: pd.DataFrame,
                            groups: str = "group") -> dict[str, int]:
    """Directions the ranker fixes / breaks relative to the reference, and groups by sign of net gain.

    Net gain of a group = its corrections minus its regressions; every group with an
    eligible direction is counted once, in exactly one of positive/zero/negative.
    """
    dirs = _aligned_population(outcomes, directions_annotated)
    ours = outcomes["strict"].to_numpy(dtype=bool)
    ref = _reference_strict(outcomes, reference).astype(bool)
    gain = pd.Series(ours.astype(int) - ref.astype(int)).groupby(dirs[groups].to_numpy()).sum()
    return {
        "corrections": int((ours & ~ref).sum()),
        "regressions": int((~ours & ref).sum()),
        "groups_positive": int((gain > 0).sum()),
        "groups_zero": int((gain == 0).sum()),
        "groups_negative": int((gain < 0).sum()),
    }
