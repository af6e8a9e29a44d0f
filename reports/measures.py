"""Preference and position measures over Q_c (docs/protocol.md#measures), defined apart from their computation.

In the spirit of ir_measures, each Table II column is a small typed record saying
what it measures, how it aggregates and how it is presented and used (unit, digits,
label, interval, contract, the outputs that show it, claims, pins, ``--compare-to``);
``TABLE2`` lists them in table2.csv's order and every output, vocabulary and
``summarize``, the one evaluator that applies them, derives its columns from it. Per-direction outcomes are computed once per ranking
(``direction_outcomes``), so strict preference, ties, ranks and the bootstrap all
read the same numbers.

Strict preference compares the ranker's ordered keys (k0, k1, k2)
lexicographically. Equal keys are ties and ties are failures: list positions break
ties by passage id, but a position never creates a success.

Every rate and mean carries a 95% source-group bootstrap interval (same draws for
all columns of a row); a ranker evaluated on its designated pair only (no
full-pool ranks) gets NaN position measures while its preference measures stand.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from fixtures.populations import eligible_directions
from fixtures.settings import SEED
from rankers.base import KEY_COLUMNS, Ranking, strictly_greater
from reports.bootstrap import N_RESAMPLES, Ratio, group_bootstrap
from reports.stats import PairedDifference, paired_difference

OUTCOME_COLUMNS = ("qid", "rank_pos", "rank_neg", "strict", "tie", "fallback")

Aggregate = Literal["count", "pct", "mean"]
#: Per-direction arrays a measure reads: n (ones), strict, tie, fallback, rank_pos, rank_neg (floats).
Columns = Mapping[str, np.ndarray]
#: Where a Table II column can be shown besides table2.csv: the terminal brief, report.md, table2.tex, the explorer.
Output = Literal["brief", "report", "latex", "explorer"]
OUTPUTS: tuple[Output, ...] = ("brief", "report", "latex", "explorer")
#: Units of a column: a population size (written with thousands separators), a count of outcomes, a percentage, a
#: full-pool rank, a Δ in points; a mean of another value is in that value's own unit (MRR, nDCG).
POPULATION, COUNT, PERCENT, RANK, POINTS = "directions", "count", "%", "rank", "pts"


@dataclass(frozen=True, kw_only=True)
class Column:
    """What every output and vocabulary needs to know of a Table II column, so that none lists columns of its own.

    ``label`` is the human heading (report.md, the explorer), ``tex`` the LaTeX one; ``digits`` the
    decimals a rate or mean is written with; ``contract`` puts the column among table2.csv's contract
    columns (docs/protocol.md#outputs); ``shown`` names the outputs that show it and ``bare`` those of
    them that show it without its interval (a narrow table); ``claimable`` lets a profile claim on it,
    ``pinnable`` pin it, ``floored`` floor it with a ranker's ``<name>_min`` gate; ``compared`` puts it
    in ``--compare-to``.
    """

    unit: str = COUNT
    digits: int = 0
    label: str = ""
    tex: str = ""
    contract: bool = False
    shown: frozenset[Output] = frozenset()
    bare: frozenset[Output] = frozenset()
    claimable: bool = False
    pinnable: bool = False
    floored: bool = False
    compared: bool = False

    @property
    def bounds(self) -> tuple[str, str] | None:
        """The two Table II columns holding this column's 95% interval, None when it has none."""
        return None


class BootstrappedColumn(Column):
    """A column whose subclass declares ``name`` and ``interval``: with ``interval`` set, its 95% source-group
    bootstrap interval is in ``<name>_lo`` and ``<name>_hi``."""

    name: str
    interval: bool

    @property
    def bounds(self) -> tuple[str, str] | None:
        return (f"{self.name}_lo", f"{self.name}_hi") if self.interval else None


@dataclass(frozen=True)
class DirectionMeasure(BootstrappedColumn):
    """A Table II column aggregating one per-direction value over Q_c.

    ``count`` sums the value, ``pct`` is 100 × its mean, ``mean`` its mean.
    ``position`` measures read full-pool ranks and are NaN for a ranker without them.
    ``interval``: it has a 95% source-group bootstrap interval, columns ``<name>_lo`` and ``<name>_hi``.
    ``paired``: claims, pins and ``--compare-to`` test it direction by direction (``PAIRED_MEASURES``).
    """

    name: str
    value: Callable[[Columns], np.ndarray]
    aggregate: Aggregate
    doc: str
    position: bool = False
    interval: bool = False
    paired: bool = False


@dataclass(frozen=True)
class PairMeasure(BootstrappedColumn):
    """A column over complete pairs (both directions eligible), NevIR's paired aggregation."""

    name: str
    doc: str
    interval: bool = False


@dataclass(frozen=True)
class BaselineMeasure(Column):
    """A column comparing the ranker with its baseline (``compare_to``) ranker over the same Q_c; ``interval`` names
    the two columns of its 95% interval when it has one."""

    name: str
    doc: str
    interval: tuple[str, str] | None = None

    @property
    def bounds(self) -> tuple[str, str] | None:
        return self.interval


@dataclass(frozen=True)
class IntervalMeasure(Column):
    """One end of the 95% source-group bootstrap interval of another Table II column, in its units."""

    name: str
    of: str
    end: Literal["lo", "hi"]
    doc: str


@dataclass(frozen=True)
class ChangeMeasure(Column):
    """Directions the ranker fixes or breaks against its baseline, or source groups by net gain
    (``corrections_regressions``): the session adds them to the ``summarize`` row."""

    name: str
    doc: str


Measure = DirectionMeasure | PairMeasure | BaselineMeasure | IntervalMeasure | ChangeMeasure
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


def _interval(of: DirectionMeasure | PairMeasure) -> tuple[IntervalMeasure, IntervalMeasure]:
    unit = "complete pairs" if isinstance(of, PairMeasure) else "directions"
    return tuple(IntervalMeasure(f"{of.name}_{end}", of.name, end, f"{'lower' if end == 'lo' else 'upper'} end of the "
                                 f"95% source-group bootstrap interval of {of.name} ({unit} resampled with their "
                                 "groups)", unit=of.unit, digits=of.digits)
                 for end in ("lo", "hi"))


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
#: interval appended after them (``_table2``).
_UNCERTAINTY: tuple[Measure, ...] = (
    *_interval(_CONTRACT_BY_NAME["strict_pct"]),
    *_interval(_CONTRACT_BY_NAME["mrr"]),
    *_interval(_CONTRACT_BY_NAME["paired_pct"]),
    BaselineMeasure("delta_mrr", "mrr minus the baseline's (NaN when either lacks full-pool ranks)",
                    ("delta_mrr_lo", "delta_mrr_hi"), unit="MRR", digits=4),
    BaselineMeasure("delta_mrr_lo", "lower end of the 95% source-group bootstrap interval of delta_mrr", unit="MRR",
                    digits=4),
    BaselineMeasure("delta_mrr_hi", "upper end of the 95% source-group bootstrap interval of delta_mrr", unit="MRR",
                    digits=4),
    BaselineMeasure("mde_pts", "smallest true Δ strict (points) a two-sided α 0.05 group sign-flip test detects with "
                                "80% power: (z_0.975 + z_0.80) × sqrt(Σ_g D_g²) / n × 100, D_g the group's summed "
                                "difference (docs/statistics.md#power)", unit=POINTS, digits=2),
    BaselineMeasure("se_delta_pts", "bootstrap standard error of delta_pts (SD of the 2,000 resampled Δ)", unit=POINTS,
                    digits=2),
    BaselineMeasure("se_delta_mrr", "bootstrap standard error of delta_mrr", unit="MRR", digits=4),
    BaselineMeasure("mde_mrr", "smallest true Δ MRR detectable the same way: (z_0.975 + z_0.80) × sqrt(Σ_g D_g²) / n "
                                "with D_g the group's summed reciprocal-rank difference", unit="MRR", digits=4),
    *(end for name in ("pref_at_1", "pref_at_3", "pref_at_10", "mean_rank_pos", "mean_rank_neg")
      for end in _interval(_CONTRACT_BY_NAME[name])),
)
_CHANGES: tuple[Measure, ...] = (
    ChangeMeasure("corrections", "directions strict for the ranker and not for its baseline"),
    ChangeMeasure("regressions", "directions strict for the baseline and not for the ranker"),
    ChangeMeasure("groups_positive", "source groups whose corrections outnumber their regressions"),
    ChangeMeasure("groups_zero", "source groups with as many corrections as regressions"),
    ChangeMeasure("groups_negative", "source groups whose regressions outnumber their corrections"),
)


def _table2(contract: tuple[Measure, ...], uncertainty: tuple[Measure, ...],
            changes: tuple[Measure, ...]) -> tuple[Measure, ...]:
    """Every Table II column in table2.csv's order, checked: names unique, every interval bound a column, every
    measure with an interval given its two ends (appended after the uncertainty columns when new)."""
    placed = {m.of for m in uncertainty if isinstance(m, IntervalMeasure)}
    later = tuple(end for m in contract if isinstance(m, (DirectionMeasure, PairMeasure)) and m.interval
                  and m.name not in placed for end in _interval(m))
    columns = (*contract, *uncertainty, *later, *changes)
    names = [m.name for m in columns]
    if len(names) != len(set(names)):
        raise ValueError(f"Table II names a column twice: {sorted(n for n in set(names) if names.count(n) > 1)}")
    by_name = dict(zip(names, columns))
    for m in columns:
        if m.bounds is not None and not set(m.bounds) <= set(names):
            raise ValueError(f"Table II column {m.name!r}: its interval {m.bounds} is not among the columns")
        if isinstance(m, IntervalMeasure) and by_name[m.of].bounds is None:
            raise ValueError(f"Table II column {m.name!r} bounds {m.of!r}, which has no interval")
        if m.shown - {"brief"} and not m.label:
            raise ValueError(f"Table II column {m.name!r} is shown in {sorted(m.shown)} without a label")
    return columns


#: Every Table II column, in table2.csv's order: the registry every output, vocabulary and ``summarize`` reads.
TABLE2: tuple[Measure, ...] = _table2(_CONTRACT, _UNCERTAINTY, _CHANGES)
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


def _baseline_columns(outcomes: pd.DataFrame, baseline: pd.DataFrame) -> dict[str, np.ndarray]:
    where = _positions(pd.Index(baseline["qid"]), outcomes["qid"], "baseline outcomes")
    if (where < 0).any() or len(baseline) != len(outcomes):
        raise ValueError(f"baseline outcomes cover a different Q_c (e.g. missing {outcomes['qid'][where < 0].head(3).tolist()}; "
                         f"{len(baseline)} vs {len(outcomes)} directions)")
    return outcome_columns(baseline.iloc[where], "baseline outcomes")


def _aggregate(values: np.ndarray, how: Aggregate) -> float | int:
    if how == "count":
        return int(values.sum())
    if len(values) == 0:
        return float("nan")
    return float(values.mean() * (100.0 if how == "pct" else 1.0))


def _pair_population(dirs: pd.DataFrame, strict: np.ndarray, groups: str) -> pd.DataFrame:
    """One row per complete pair: both (strict in both directions) and the pair's source group."""
    complete = dirs["complete"].to_numpy(dtype=bool)
    frame = pd.DataFrame({"split": dirs["split"].to_numpy()[complete], "pair_id": dirs["pair_id"].to_numpy()[complete],
                          "strict": strict[complete].astype(int), "group": dirs[groups].to_numpy()[complete]})
    pairs = frame.groupby(["split", "pair_id"], sort=True).agg(hits=("strict", "sum"), group=("group", "first"),
                                                               groups=("group", "nunique"))
    split_pairs = pairs[pairs["groups"] > 1]
    if len(split_pairs):
        raise ValueError(f"pair {split_pairs.index[0]} spans {int(split_pairs['groups'].iat[0])} source groups in "
                         f"column {groups!r}; a pair's directions must share a group")
    return pairs.assign(both=(pairs["hits"] == 2).astype(float))


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

    pairs = _pair_population(dirs, cols["strict"], groups) if len(dirs) else pd.DataFrame({"both": []})
    row["paired"] = int(pairs["both"].sum())
    row["paired_n"] = int(len(pairs))
    row["paired_pct"] = 100.0 * row["paired"] / row["paired_n"] if row["paired_n"] else float("nan")
    if row["paired_n"]:
        ci = group_bootstrap({"both": pairs["both"].to_numpy(), "pairs": np.ones(len(pairs))}, pairs["group"].to_numpy(),
                             {"paired_pct": Ratio("both", "pairs")}, n_resamples, seed)["paired_pct"]
        row["paired_pct_lo"], row["paired_pct_hi"] = 100 * ci.lo, 100 * ci.hi
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
        ref = _baseline_columns(outcomes, baseline)
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


#: NevIR's paired accuracy on the given pair (docs/protocol.md#given-pair-paired), under each tie rule: ``fail``, a
#: tied direction is wrong (this suite's strict rule); ``random``, a tied direction is right with probability 1/2 and
#: the pair's credit is the product of its two directions' (the expectation over uniformly random tie orders, each
#: query ranked on its own: MTEB's recall@1 over the two passages leaves a tie in arbitrary order).
GIVEN_PAIR_TIE_RULES = ("fail", "random")


def given_pair_paired(pair_outcomes: pd.DataFrame, directions_annotated: pd.DataFrame, groups: str = "group",
                      n_resamples: int = N_RESAMPLES, seed: int = SEED) -> dict[str, object]:
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
    per = pd.DataFrame({"pair_id": dirs["pair_id"].to_numpy(), "group": dirs[groups].to_numpy(),
                        "fail": strict.astype(float), "random": strict + 0.5 * tie, "tie": tie})[complete]
    pairs = per.groupby("pair_id", sort=True).agg(fail=("fail", "prod"), random=("random", "prod"),
                                                  tied=("tie", "any"), group=("group", "first"),
                                                  directions=("fail", "size"))
    if (pairs["directions"] != 2).any():
        raise ValueError(f"pair {pairs.index[pairs['directions'] != 2][0]!r} is marked complete without two directions")
    row: dict[str, object] = {"pairs": int(len(pairs)), "paired": int(pairs["fail"].sum()),
                              "tied_pairs": int(pairs["tied"].sum())}
    for rule in GIVEN_PAIR_TIE_RULES:
        suffix = "" if rule == "fail" else f"_{rule}"
        row[f"paired{suffix}_pct"] = 100.0 * float(pairs[rule].mean()) if len(pairs) else float("nan")
        row[f"paired{suffix}_lo"] = row[f"paired{suffix}_hi"] = float("nan")
    if len(pairs):
        ones = np.ones(len(pairs))
        boot = group_bootstrap({"fail": pairs["fail"].to_numpy(), "random": pairs["random"].to_numpy(), "pairs": ones},
                               pairs["group"].to_numpy(),
                               {rule: Ratio(rule, "pairs") for rule in GIVEN_PAIR_TIE_RULES}, n_resamples, seed)
        for rule in GIVEN_PAIR_TIE_RULES:
            suffix = "" if rule == "fail" else f"_{rule}"
            row[f"paired{suffix}_lo"], row[f"paired{suffix}_hi"] = 100 * boot[rule].lo, 100 * boot[rule].hi
    return row


def corrections_regressions(outcomes: pd.DataFrame, baseline: pd.DataFrame, directions_annotated: pd.DataFrame,
                            groups: str = "group") -> dict[str, int]:
    """Directions the ranker fixes / breaks relative to its baseline, and groups by sign of net gain.

    Net gain of a group = its corrections minus its regressions; every group with an
    eligible direction is counted once, in exactly one of positive/zero/negative.
    """
    dirs = aligned_population(outcomes, directions_annotated)
    ours = outcome_columns(outcomes)["strict"].astype(bool)
    ref = _baseline_columns(outcomes, baseline)["strict"].astype(bool)
    gain = pd.Series(ours.astype(int) - ref.astype(int)).groupby(dirs[groups].to_numpy()).sum()
    return {
        "corrections": int((ours & ~ref).sum()),
        "regressions": int((~ours & ref).sum()),
        "groups_positive": int((gain > 0).sum()),
        "groups_zero": int((gain == 0).sum()),
        "groups_negative": int((gain < 0).sum()),
    }
