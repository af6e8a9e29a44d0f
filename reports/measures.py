"""The registry of the result tables' columns (docs/protocol.md#measures) and the evaluators that apply it:
``summarize`` (Table II), ``pair_only_row`` (Table III's pair-only side) and ``nevir_paired_row``.

In the spirit of ir_measures, each column is one record (``reports.columns``); ``TABLE2`` lists them in table2.csv's
order and every output, vocabulary and ``summarize`` derives its columns from it, so a measure is declared once.
``TABLE3`` (Table III: Table II measures on the pair-only and the window side) and ``NEVIR_PAIRED`` (given-pair
paired accuracy) list theirs the same way. The measures two rankers are compared on direction by direction
(``PAIRED_MEASURES``) are named here too.

Every rate and mean carries a 95% source-group bootstrap interval (same draws for all columns of a row); a ranker
evaluated on its designated pair only (no full-pool ranks) gets NaN position measures while its preference measures
stand.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fixtures.settings import SEED
from reports.bootstrap import N_RESAMPLES, Ratio, group_bootstrap
from reports.columns import (OUTPUTS, PERCENT, POINTS, POPULATION, RANK, Aggregate, BaselineMeasure,
                             ChangeMeasure, Columns, DirectionMeasure, GivenPairMeasure, IntervalMeasure, Measure,
                             Output, PairMeasure, SideColumn, checked, interval_ends, table2_order)
from reports.outcomes import aligned_population, baseline_columns, outcome_columns
from reports.pairs import GivenPairPaired, paired_accuracy
from reports.stats import PairedDifference, paired_difference

_ALL: frozenset[Output] = frozenset(OUTPUTS)


def _col(name: str) -> Callable[[Columns], np.ndarray]:
    return lambda c: c[name]


def _pref_at(k: int, shown: frozenset[Output] = frozenset(), bare: frozenset[Output] = frozenset()) -> DirectionMeasure:
    return DirectionMeasure(f"pref_at_{k}", lambda c: (c["rank_pos"] <= k).astype(float), "pct",
                            f"% of Q_c with the preferred passage at full-pool rank <= {k}", position=True,
                            interval=True, unit=PERCENT, digits=2, label=f"Pref@{k} %", tex=rf"Pref@{k} (\%)",
                            contract=True, shown=shown, bare=bare)


def _ndcg_at(k: int) -> Callable[[Columns], np.ndarray]:
    """nDCG@k with the preferred passage the one relevant passage (gain 1, ideal DCG 1): 1/log2(1 + r⁺) when
    r⁺ <= k, else 0 (docs/protocol.md#ndcg-at-10)."""
    def value(c: Columns) -> np.ndarray:
        rank = np.asarray(c["rank_pos"], dtype=float)
        return np.where(rank <= k, 1.0 / np.log2(1.0 + rank), 0.0)
    return value


#: Table II's contract columns after ``ranker``, in table2.csv's order (docs/protocol.md#outputs). The contract only
#: appends: a new measure goes last.
_CONTRACT: tuple[Measure, ...] = (
    DirectionMeasure("n", _col("n"), "count", "directions in Q_c", unit=POPULATION, label="n", tex="$n$",
                     contract=True, shown=_ALL, pinnable=True, compared=True),
    DirectionMeasure("strict", _col("strict"), "count", "directions whose preferred key is strictly greater",
                     label="strict", contract=True, shown=frozenset(("brief", "report")), pinnable=True,
                     compared=True),
    DirectionMeasure("strict_pct", _col("strict"), "pct", "strict preference, % of Q_c", interval=True,
                     unit=PERCENT, digits=2, label="strict %", tex=r"Strict (\%)", contract=True, shown=_ALL,
                     claimable=True, pinnable=True, floored=True, compared=True),
    PairMeasure("paired", "complete pairs strict in both directions", contract=True, pinnable=True),
    PairMeasure("paired_n", "complete pairs", unit=POPULATION, contract=True),
    PairMeasure("paired_pct", "paired accuracy, % of complete pairs", interval=True, unit=PERCENT, digits=2,
                label="paired %", tex=r"Paired (\%)", contract=True, shown=_ALL, compared=True),
    DirectionMeasure("mrr", lambda c: 1.0 / c["rank_pos"], "mean", "preferred-passage MRR over the full pool",
                     position=True, interval=True, unit="MRR", digits=4, label="MRR", tex="MRR", contract=True,
                     shown=_ALL, claimable=True, pinnable=True, floored=True, compared=True),
    _pref_at(1, shown=_ALL, bare=frozenset(("latex", "explorer"))),
    _pref_at(3),
    _pref_at(10, shown=frozenset(("brief",))),
    DirectionMeasure("mean_rank_pos", _col("rank_pos"), "mean", "mean full-pool rank of the preferred passage",
                     position=True, interval=True, unit=RANK, digits=2, label="mean rank d⁺", contract=True,
                     shown=frozenset(("brief",))),
    DirectionMeasure("mean_rank_neg", _col("rank_neg"), "mean", "mean full-pool rank of the counterpart passage",
                     position=True, interval=True, unit=RANK, digits=2, label="mean rank d⁻", contract=True,
                     shown=frozenset(("brief",))),
    DirectionMeasure("both_top10", lambda c: ((c["rank_pos"] <= 10) & (c["rank_neg"] <= 10)).astype(float), "count",
                     "directions with both designated passages in the top 10", position=True, contract=True),
    DirectionMeasure("ties", _col("tie"), "count", "directions whose two designated keys are equal (failures)",
                     paired=True, label="ties", tex="Ties", contract=True, shown=_ALL, pinnable=True, compared=True),
    DirectionMeasure("fallback", _col("fallback"), "count", "directions restored to the reference order",
                     paired=True, label="fallback", contract=True, shown=frozenset(("brief", "report", "explorer")),
                     compared=True),
    BaselineMeasure("delta_pts", "strict_pct minus the baseline's on the same directions, in points",
                    ("delta_lo", "delta_hi"), unit=POINTS, digits=2, label="Δ strict pts",
                    tex=r"$\Delta$ strict (pts)", contract=True, shown=_ALL),
    BaselineMeasure("delta_lo", "lower end of the 95% source-group bootstrap interval of delta_pts", unit=POINTS,
                    digits=2, contract=True, shown=frozenset(("brief",))),
    BaselineMeasure("delta_hi", "upper end of the 95% source-group bootstrap interval of delta_pts", unit=POINTS,
                    digits=2, contract=True, shown=frozenset(("brief",))),
    DirectionMeasure("ndcg_at_10", _ndcg_at(10), "mean", "nDCG@10 of the preferred passage (gain 1, every other "
                     "passage 0): 1/log2(1 + r⁺) when r⁺ <= 10, else 0", position=True, interval=True,
                     paired=True, unit="nDCG", digits=4, label="nDCG@10", tex="nDCG@10", contract=True, shown=_ALL,
                     claimable=True, pinnable=True, compared=True),
)
_CONTRACT_BY_NAME = {m.name: m for m in _CONTRACT}
#: The uncertainty columns after the contract's, in the order they were introduced; a measure added since has its
#: interval appended after them (``reports.columns.table2_order``).
_UNCERTAINTY: tuple[Measure, ...] = (
    *interval_ends(_CONTRACT_BY_NAME["strict_pct"]),
    *interval_ends(_CONTRACT_BY_NAME["mrr"]),
    *interval_ends(_CONTRACT_BY_NAME["paired_pct"]),
    BaselineMeasure("delta_mrr", "mrr minus the baseline's (NaN when either lacks full-pool ranks)",
                    ("delta_mrr_lo", "delta_mrr_hi"), unit="MRR", digits=4),
    BaselineMeasure("delta_mrr_lo", "lower end of the 95% source-group bootstrap interval of delta_mrr", unit="MRR",
                    digits=4),
    BaselineMeasure("delta_mrr_hi", "upper end of the 95% source-group bootstrap interval of delta_mrr", unit="MRR",
                    digits=4),
    BaselineMeasure("mde_pts", "the sign-flip statistic's normal-limit MDE, not the decision test's: smallest true "
                                "Δ strict (points) its two-sided α 0.05 normal limit detects with 80% power, "
                                "(z_0.975 + z_0.80) × sqrt(Σ_g D_g²) / n × 100, D_g the group's summed difference; a "
                                "lower bound on the decision test's MDE, which claims.csv's mde reports "
                                "(docs/statistics.md#power)", unit=POINTS, digits=2),
    BaselineMeasure("se_delta_pts", "bootstrap standard error of delta_pts (SD of the 2,000 resampled Δ)", unit=POINTS,
                    digits=2),
    BaselineMeasure("se_delta_mrr", "bootstrap standard error of delta_mrr", unit="MRR", digits=4),
    BaselineMeasure("mde_mrr", "the sign-flip statistic's normal-limit MDE of Δ MRR, as mde_pts (not the decision "
                                "test's): (z_0.975 + z_0.80) × sqrt(Σ_g D_g²) / n with D_g the group's summed "
                                "reciprocal-rank difference", unit="MRR", digits=4),
    *(end for name in ("pref_at_1", "pref_at_3", "pref_at_10", "mean_rank_pos", "mean_rank_neg")
      for end in interval_ends(_CONTRACT_BY_NAME[name])),
)
_CHANGES: tuple[Measure, ...] = (
    ChangeMeasure("corrections", "directions strict for the ranker and not for its baseline"),
    ChangeMeasure("regressions", "directions strict for the baseline and not for the ranker"),
    ChangeMeasure("groups_positive", "source groups whose corrections outnumber their regressions"),
    ChangeMeasure("groups_zero", "source groups with as many corrections as regressions"),
    ChangeMeasure("groups_negative", "source groups whose regressions outnumber their corrections"),
)


#: Every Table II column, in table2.csv's order: the registry every output, vocabulary and ``summarize`` reads.
TABLE2: tuple[Measure, ...] = table2_order(_CONTRACT, _UNCERTAINTY, _CHANGES)
DIRECTION_MEASURES: tuple[DirectionMeasure, ...] = tuple(m for m in TABLE2 if isinstance(m, DirectionMeasure))
PAIR_MEASURES: tuple[PairMeasure, ...] = tuple(m for m in TABLE2 if isinstance(m, PairMeasure))
BASELINE_MEASURES: tuple[BaselineMeasure, ...] = tuple(m for m in TABLE2 if isinstance(m, BaselineMeasure))
INTERVAL_MEASURES: tuple[IntervalMeasure, ...] = tuple(m for m in TABLE2 if isinstance(m, IntervalMeasure))
CHANGE_MEASURES: tuple[ChangeMeasure, ...] = tuple(m for m in TABLE2 if isinstance(m, ChangeMeasure))
#: Table II column order (docs/protocol.md#outputs): the contract other tools read.
TABLE2_COLUMNS: tuple[str, ...] = ("ranker", *(m.name for m in TABLE2 if m.contract))
#: Uncertainty columns appended after the contract's, in this order.
TABLE2_INTERVAL_COLUMNS: tuple[str, ...] = tuple(m.name for m in TABLE2
                                                 if not m.contract and not isinstance(m, ChangeMeasure))
#: Keys of a ``summarize`` row: the contract's columns, then the uncertainty columns.
TABLE2_ROW_COLUMNS: tuple[str, ...] = (*TABLE2_COLUMNS, *TABLE2_INTERVAL_COLUMNS)
#: Columns the session adds after the intervals: directions the ranker fixes / breaks vs its baseline, groups by gain.
CHANGE_COLUMNS: tuple[str, ...] = tuple(m.name for m in CHANGE_MEASURES)


def shown_in(output: Output) -> tuple[Measure, ...]:
    """The Table II columns an output shows, in table2.csv's order."""
    return tuple(m for m in TABLE2 if output in m.shown)


def column(name: str) -> Measure:
    """A Table II column's record by its name."""
    return _BY_COLUMN[name]


_BY_COLUMN = {m.name: m for m in TABLE2}


@dataclass(frozen=True)
class PairedMeasure:
    """A measure two rankers, or two runs, are compared on direction by direction, looked up by ``name``.

    Claims, Table II's Δ columns, pairwise comparisons, pins and run comparisons all use
    these: ``of`` names the Table II measure whose per-direction value is differenced, and
    Δ is that value's mean difference × 100 (points) for rates and counts, × 1 for means.
    ``columns`` are the Table II columns the comparison speaks for (a pin on ``strict`` or
    ``strict_pct`` is decided by the same test); ``delta_columns`` name its Table II Δ, interval
    ends, SE and MDE, and ``p_column`` its p-value in pairwise.csv; ``words`` how a claim on it reads.
    """

    name: str
    of: str
    unit: str
    columns: tuple[str, ...]
    delta_columns: tuple[str, str, str, str, str] | None = None
    p_column: str | None = None
    words: str = ""

    @property
    def source(self) -> DirectionMeasure:
        return _BY_NAME[self.of]

    @property
    def scale(self) -> float:
        return 1.0 if self.source.aggregate == "mean" else 100.0

    @property
    def digits(self) -> int:
        """Decimals a Δ is written with: two for points, the measure's own for a mean."""
        return self.source.digits if self.source.aggregate == "mean" else 2

    @property
    def position(self) -> bool:
        return self.source.position

    def values(self, cols: Columns) -> np.ndarray:
        return np.asarray(self.source.value(cols), dtype=float)

    def in_column(self, column: str, effect: float, n: int) -> float:
        """A Δ in this measure's unit restated in a Table II column's own unit (a count column counts directions)."""
        if column not in self.columns:
            raise KeyError(f"{self.name!r} does not decide Table II column {column!r}; it decides {self.columns}")
        return effect / self.scale * n if _BY_NAME[column].aggregate == "count" else effect


_BY_NAME = {m.name: m for m in DIRECTION_MEASURES}
#: The comparisons with Table II Δ columns and pairwise.csv p-values; every other ``paired`` direction measure is
#: compared under its own name, Δ in points for a rate or count, in its own unit for a mean.
_WITH_DELTAS: tuple[PairedMeasure, ...] = (
    PairedMeasure("strict", "strict_pct", POINTS, ("strict", "strict_pct"),
                  ("delta_pts", "delta_lo", "delta_hi", "se_delta_pts", "mde_pts"), "p_strict", "strict preference"),
    PairedMeasure("mrr", "mrr", "MRR", ("mrr",),
                  ("delta_mrr", "delta_mrr_lo", "delta_mrr_hi", "se_delta_mrr", "mde_mrr"), "p_mrr",
                  "preferred-passage MRR"),
)
PAIRED_MEASURES: tuple[PairedMeasure, ...] = (*_WITH_DELTAS, *(
    PairedMeasure(m.name, m.name, m.unit if m.aggregate == "mean" else POINTS, (m.name,), words=m.label)
    for m in DIRECTION_MEASURES if m.paired and all(m.name not in p.columns for p in _WITH_DELTAS)))
_PAIRED_BY_NAME = {m.name: m for m in PAIRED_MEASURES}

#: Directions whose pair-only score of either designated passage is unavailable (failures): counted on Table III's
#: pair-only side only, as a ranking leaves no direction unavailable.
UNAVAILABLE = DirectionMeasure("unavailable", _col("unavailable"), "count",
                               "directions whose pair-only score of either designated passage is unavailable "
                               "(failures)")
#: Table III's columns after ``scorer``, in table3.csv's order (docs/protocol.md#outputs): the Q_c both sides count,
#: then pair-only scoring's (L1) strict preference, ties and unavailable directions, then window reranking's (L2)
#: strict preference.
TABLE3: tuple[SideColumn, ...] = (
    SideColumn(_BY_NAME["n"]),
    *(SideColumn(m, "l1") for m in (_BY_NAME["strict"], _BY_NAME["strict_pct"], _BY_NAME["ties"], UNAVAILABLE)),
    *(SideColumn(_BY_NAME[name], "l2") for name in ("strict", "strict_pct")),
)
TABLE3_COLUMNS: tuple[str, ...] = ("scorer", *(c.name for c in TABLE3))


def _rate(m: GivenPairMeasure) -> tuple[Measure, ...]:
    return (m, *interval_ends(m))


#: nevir_paired.csv's columns after ``scorer``, in its order (docs/protocol.md#given-pair-paired): a pair-only
#: scorer's complete pairs and its paired accuracy on the given pair under each tie rule, with 95% intervals.
NEVIR_PAIRED: tuple[Measure, ...] = checked("nevir_paired", (
    GivenPairMeasure("pairs", "complete pairs among the scorer's eligible directions", unit=POPULATION),
    GivenPairMeasure("paired", "complete pairs whose two directions are both strict (a tie fails)"),
    *_rate(GivenPairMeasure("paired_pct", "given-pair paired accuracy, a tied direction failing, % of complete pairs",
                            rule="fail", interval=("paired_lo", "paired_hi"), unit=PERCENT, digits=2)),
    GivenPairMeasure("tied_pairs", "complete pairs with a tied direction: where the two tie rules differ"),
    *_rate(GivenPairMeasure("paired_trec_pct", "given-pair paired accuracy, a tied direction's passages ordered by "
                            "passage id descending as trec_eval orders equal scores (MTEB's NevIR task: recall@1 by "
                            "pytrec_eval), % of complete pairs", rule="trec",
                            interval=("paired_trec_lo", "paired_trec_hi"), unit=PERCENT, digits=2)),
))
NEVIR_PAIRED_COLUMNS: tuple[str, ...] = ("scorer", *(m.name for m in NEVIR_PAIRED))


def aggregate(column: str, cols: Columns) -> float | int:
    """A Table II direction measure's value over the given per-direction columns, by the column's name."""
    m = _BY_NAME[column]
    return _aggregate(np.asarray(m.value(cols), dtype=float), m.aggregate)


def paired_measure(name: str) -> PairedMeasure:
    """A paired measure by its name (``strict``, ``mrr``, ...) or by a Table II column it decides (``strict_pct``)."""
    if name in _PAIRED_BY_NAME:
        return _PAIRED_BY_NAME[name]
    for m in PAIRED_MEASURES:
        if name in m.columns:
            return m
    known = sorted({*_PAIRED_BY_NAME, *(c for m in PAIRED_MEASURES for c in m.columns)})
    raise KeyError(f"no paired measure named {name!r}; known: {known}")


def delta_row(measure: PairedMeasure, diff: PairedDifference | None) -> dict[str, float]:
    """A paired difference as its Table II Δ columns (NaN when it could not be computed)."""
    names = measure.delta_columns or ()
    if diff is None:
        return dict.fromkeys(names, float("nan"))
    return dict(zip(names, (diff.effect, diff.lo, diff.hi, diff.se, diff.mde)))


def pair_only_row(cols: Columns) -> dict[str, float | int]:
    """Table III's pair-only (L1) values of one scorer by measure name (``n``, ``strict``, ``strict_pct``, ``ties``,
    ``unavailable``), from its per-direction columns (n, strict, tie, unavailable).

    A rate is 100 × its count / n, exactly rounded, as table3.csv has always written it; Table II's rate is its
    mean × 100 (``summarize``), which can differ from it in the last binary place.
    """
    n = len(cols["n"])
    row: dict[str, float | int] = {}
    for c in TABLE3:
        if c.side != "l2":
            values = np.asarray(c.measure.value(cols), dtype=float)
            row[c.measure.name] = (_aggregate(values, c.measure.aggregate) if c.measure.aggregate != "pct"
                                   else 100.0 * float(values.sum()) / n if n else float("nan"))
    return row


def nevir_paired_row(scorer: str, result: GivenPairPaired) -> dict[str, object]:
    """One nevir_paired.csv row, keys exactly ``NEVIR_PAIRED_COLUMNS``: a count column is the result's value under
    its name, a rate column its tie rule's percentage, then that rate's interval."""
    row: dict[str, object] = {"scorer": scorer}
    for m in NEVIR_PAIRED:
        if isinstance(m, GivenPairMeasure) and m.rule is None:
            row[m.name] = getattr(result, m.name)
        elif isinstance(m, GivenPairMeasure):
            rate = result.rates[m.rule]
            row[m.name] = rate.pct
            row.update(zip(m.bounds or (), (rate.lo, rate.hi)))
    return {c: row[c] for c in NEVIR_PAIRED_COLUMNS}


def _aggregate(values: np.ndarray, how: Aggregate) -> float | int:
    if how == "count":
        return int(values.sum())
    if len(values) == 0:
        return float("nan")
    return float(values.mean() * (100.0 if how == "pct" else 1.0))


def summarize(outcomes: pd.DataFrame, directions_annotated: pd.DataFrame, baseline: pd.DataFrame | None = None,
              groups: str = "group", n_resamples: int = N_RESAMPLES, seed: int = SEED,
              ranker: str | None = None) -> dict[str, object]:
    """One Table II row: keys exactly ``TABLE2_ROW_COLUMNS`` (contract columns, then intervals), else an error.

    ``baseline`` holds the baseline (``compare_to``) ranker's outcomes over the same Q_c; the
    Δ, MDE and SE columns (``paired_difference``, computed once per measure for every table
    and claim) are NaN without one or for the baseline itself. ``groups``
    names the directions column used as bootstrap unit (``group``, or ``group_rules``
    for the sensitivity check). Direction-level intervals share one set of draws over
    the directions' groups; paired_pct resamples the complete pairs with their groups.
    """
    name = ranker if ranker is not None else outcomes.attrs.get("ranker")
    if name is None:
        raise ValueError("summarize needs a ranker name: pass ranker= or outcomes from direction_outcomes")
    dirs = aligned_population(outcomes, directions_annotated)
    cols = outcome_columns(outcomes, f"outcomes of {name!r}")
    has_ranks = "rank_pos" in cols
    row: dict[str, object] = {"ranker": name}
    row.update({m.name: _aggregate(m.value(cols), m.aggregate) if has_ranks or not m.position else float("nan")
                for m in DIRECTION_MEASURES})
    row.update(dict.fromkeys((m.name for m in (*BASELINE_MEASURES, *INTERVAL_MEASURES)), float("nan")))
    if len(dirs) and groups not in dirs.columns:
        raise ValueError(f"directions frame has no bootstrap group column {groups!r}")

    accuracy = paired_accuracy(dirs, cols["strict"], groups, n_resamples, seed)
    for m in PAIR_MEASURES:  # the rate with its interval, or a count held under the column's name
        row[m.name] = accuracy.rate.pct if m.interval else getattr(accuracy, m.name)
        row.update(zip(m.bounds or (), (accuracy.rate.lo, accuracy.rate.hi)))
    if not len(dirs):
        return _row_of_columns(row)

    targets = [_BY_NAME[of] for of in dict.fromkeys(m.of for m in INTERVAL_MEASURES) if of in _BY_NAME
               and (has_ranks or not _BY_NAME[of].position)]
    values = {"n": cols["n"]} | {m.name: m.value(cols) for m in targets}
    statistics = {m.name: Ratio(m.name, "n") for m in targets}
    boot = group_bootstrap(values, dirs[groups].to_numpy(), statistics, n_resamples, seed)
    for m in targets:
        scale = 100.0 if m.aggregate == "pct" else 1.0
        row[f"{m.name}_lo"], row[f"{m.name}_hi"] = scale * boot[m.name].lo, scale * boot[m.name].hi
    is_baseline = baseline is None or baseline is outcomes or baseline.attrs.get("ranker", object()) == name
    if not is_baseline:
        ref = baseline_columns(outcomes, baseline)
        labels = dirs[groups].to_numpy()
        for measure in PAIRED_MEASURES:
            if measure.delta_columns and (not measure.position or (has_ranks and "rank_pos" in ref)):
                row.update(delta_row(measure, paired_difference(measure.values(cols), measure.values(ref), labels,
                                                                measure.scale, n_resamples, seed=seed)))
    return _row_of_columns(row)


def _row_of_columns(row: dict[str, object]) -> dict[str, object]:
    """``row`` in ``TABLE2_ROW_COLUMNS`` order; a value without a column, or a column without a value, is an error
    (never a silently dropped measure)."""
    unlisted, missing = sorted(set(row) - set(TABLE2_ROW_COLUMNS)), sorted(set(TABLE2_ROW_COLUMNS) - set(row))
    if unlisted or missing:
        raise ValueError(f"summarize computed measures without a Table II column {unlisted} and left columns "
                         f"without a value {missing}: every measure is one record of reports.measures.TABLE2")
    return {c: row[c] for c in TABLE2_ROW_COLUMNS}
