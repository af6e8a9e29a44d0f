"""NevIR's paired aggregation: a complete pair (both directions eligible) counts when both of its directions are
strict (docs/protocol.md#measures), and a pair-only scorer's paired accuracy on the given pair under each tie rule
(docs/protocol.md#given-pair-paired). Pairs, not directions, are resampled here, each with its source group.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd

from fixtures.populations import eligible_directions
from fixtures.settings import SEED
from reports.bootstrap import N_RESAMPLES, Ratio, group_bootstrap


def pair_unit(frame: pd.DataFrame, groups: str) -> str:
    """The column a pair resamples with: ``groups`` when a pair lies within one of its units (source groups, or the
    pairs themselves on a sample of complete pairs); on a sample of single directions (``fixtures.samples.
    sampling_units``), where a pair's two directions are two units, a wholly drawn pair resamples with its source
    group."""
    if "source_group" not in frame.columns or frame.groupby("pair_id")[groups].nunique().le(1).all():
        return groups
    return "source_group"


def pair_population(dirs: pd.DataFrame, strict: np.ndarray, groups: str) -> pd.DataFrame:
    """One row per complete pair whose two directions ``dirs`` holds (a sample of single directions may hold one):
    both (strict in both directions) and the pair's source group."""
    complete = dirs["complete"].to_numpy(dtype=bool)
    frame = pd.DataFrame({"split": dirs["split"].to_numpy()[complete], "pair_id": dirs["pair_id"].to_numpy()[complete],
                          "strict": strict[complete].astype(int),
                          "group": dirs[pair_unit(dirs, groups)].to_numpy()[complete]})
    pairs = frame.groupby(["split", "pair_id"], sort=True).agg(hits=("strict", "sum"), group=("group", "first"),
                                                               groups=("group", "nunique"), held=("strict", "size"))
    pairs = pairs[pairs["held"] == 2].drop(columns="held")
    split_pairs = pairs[pairs["groups"] > 1]
    if len(split_pairs):
        raise ValueError(f"pair {split_pairs.index[0]} spans {int(split_pairs['groups'].iat[0])} source groups in "
                         f"column {groups!r}; a pair's directions must share a group")
    return pairs.assign(both=(pairs["hits"] == 2).astype(float))


class Rate(NamedTuple):
    """A paired accuracy in percent with its 95% source-group bootstrap interval (NaN ends without a pair)."""

    pct: float
    lo: float
    hi: float


@dataclass(frozen=True)
class PairedAccuracy:
    """Table II's paired accuracy: the complete pairs strict in both directions, the complete pairs, and the rate
    with its interval. ``reports.measures.summarize`` writes it as Table II's pair columns."""

    paired: int
    paired_n: int
    rate: Rate


def paired_accuracy(dirs: pd.DataFrame, strict: np.ndarray, groups: str, n_resamples: int,
                    seed: int) -> PairedAccuracy:
    """Paired accuracy over the complete pairs of ``dirs`` (aligned with ``strict``), with its interval when there
    is a pair: the complete pairs resampled with their groups."""
    pairs = pair_population(dirs, strict, groups) if len(dirs) else pd.DataFrame({"both": []})
    paired, n = int(pairs["both"].sum()), int(len(pairs))
    lo = hi = float("nan")
    if n:
        ci = group_bootstrap({"both": pairs["both"].to_numpy(), "pairs": np.ones(n)}, pairs["group"].to_numpy(),
                             {"paired_pct": Ratio("both", "pairs")}, n_resamples, seed)["paired_pct"]
        lo, hi = 100 * ci.lo, 100 * ci.hi
    return PairedAccuracy(paired, n, Rate(100.0 * paired / n if n else float("nan"), lo, hi))


#: NevIR's paired accuracy on the given pair (docs/protocol.md#given-pair-paired), under each tie rule: ``fail``, a
#: tied direction is wrong (this suite's strict rule); ``trec``, a tied direction is right when its preferred passage's
#: id sorts after the counterpart's: trec_eval (and pytrec_eval) rank equal scores by document id descending, and
#: MTEB's NevIR task scores recall@1 on the two passages with pytrec_eval, so this is MTEB's own computation on these
#: passage ids (tests/reports/test_given_pair.py checks it against mteb's evaluator). A pair tied in both directions
#: always fails under it: the same passage comes first for both queries.
GIVEN_PAIR_TIE_RULES = ("fail", "trec")


@dataclass(frozen=True)
class GivenPairPaired:
    """A pair-only scorer's paired accuracy on the given pair: its complete pairs, those right with ties failing,
    those with a tied direction (where the tie rules differ), and the rate under each tie rule
    (``GIVEN_PAIR_TIE_RULES``). ``reports.measures.nevir_paired_row`` writes it as nevir_paired.csv's columns."""

    pairs: int
    paired: int
    tied_pairs: int
    rates: dict[str, Rate]


def given_pair_paired(pair_outcomes: pd.DataFrame, directions_annotated: pd.DataFrame, groups: str = "group",
                      n_resamples: int = N_RESAMPLES, seed: int = SEED) -> GivenPairPaired:
    """Paired accuracy of a pair-only scorer (``reports.tables.pair_only_outcomes`` rows) over the complete pairs
    of its directions, under both tie rules, each with its source-group bootstrap interval (percent).

    Pairs with a tied direction are counted (``tied_pairs``): they are where the two rules differ.
    """
    q = eligible_directions(directions_annotated).set_index("qid")
    frame = pair_outcomes.set_index("qid")
    unknown = frame.index.difference(q.index)
    if len(unknown):
        raise ValueError(f"pair-only outcomes hold qids outside the eligible directions, e.g. {unknown[:3].tolist()}")
    dirs = q.loc[frame.index]
    complete = dirs["complete"].to_numpy(dtype=bool)
    strict = frame["strict"].to_numpy(dtype=bool)
    tie = frame["tie"].to_numpy(dtype=bool)
    first = dirs["preferred_pid"].astype(str).to_numpy() > dirs["counterpart_pid"].astype(str).to_numpy()
    per = pd.DataFrame({"pair_id": dirs["pair_id"].to_numpy(), "group": dirs[pair_unit(dirs, groups)].to_numpy(),
                        "fail": strict.astype(float), "trec": (strict | (tie & first)).astype(float),
                        "tie": tie})[complete]
    held = q.loc[q["complete"].to_numpy(dtype=bool), "pair_id"].value_counts()
    per = per[per["pair_id"].map(held).eq(2).to_numpy()]  # a sample of single directions may hold one of a pair
    pairs = per.groupby("pair_id", sort=True).agg(fail=("fail", "prod"), trec=("trec", "prod"),
                                                  tied=("tie", "any"), group=("group", "first"),
                                                  directions=("fail", "size"))
    if (pairs["directions"] != 2).any():
        raise ValueError(f"pair {pairs.index[pairs['directions'] != 2][0]!r} is marked complete without two directions")
    nan = float("nan")
    bounds = dict.fromkeys(GIVEN_PAIR_TIE_RULES, (nan, nan))
    if len(pairs):
        ones = np.ones(len(pairs))
        boot = group_bootstrap({"fail": pairs["fail"].to_numpy(), "trec": pairs["trec"].to_numpy(), "pairs": ones},
                               pairs["group"].to_numpy(),
                               {rule: Ratio(rule, "pairs") for rule in GIVEN_PAIR_TIE_RULES}, n_resamples, seed)
        bounds = {rule: (100 * boot[rule].lo, 100 * boot[rule].hi) for rule in GIVEN_PAIR_TIE_RULES}
    rates = {rule: Rate(100.0 * float(pairs[rule].mean()) if len(pairs) else nan, *bounds[rule])
             for rule in GIVEN_PAIR_TIE_RULES}
    return GivenPairPaired(int(len(pairs)), int(pairs["fail"].sum()), int(pairs["tied"].sum()), rates)
