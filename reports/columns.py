"""What a column of a result table is, apart from which columns each table has (``reports.measures``).

Each Table II column is a small typed record saying what it measures, how it aggregates and how it is presented and
used (unit, digits, label, interval, contract, the outputs that show it, claims, pins, ``--compare-to``), so that no
output or vocabulary lists columns of its own; Table III's columns are Table II measures on one side
(``SideColumn``), nevir_paired's are records of their own (``GivenPairMeasure``). The records and the checks every
column list must pass live here; the lists themselves, in each CSV's order, are the registry in ``reports.measures``.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np

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
    """A column over complete pairs (both directions eligible), NevIR's paired aggregation: with ``interval``, the
    rate of ``reports.pairs.PairedAccuracy``; without, a count it holds under the column's name."""

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
class GivenPairMeasure(Column):
    """A nevir_paired.csv column: NevIR's paired accuracy of a pair-only scorer on the given pair under one tie rule
    (``rule``, one of ``reports.pairs.GIVEN_PAIR_TIE_RULES``) with its 95% interval in the two columns ``interval``
    names, or a count of complete pairs (``rule`` None) held under the column's name by
    ``reports.pairs.GivenPairPaired`` (docs/protocol.md#given-pair-paired)."""

    name: str
    doc: str
    rule: str | None = None
    interval: tuple[str, str] | None = None

    @property
    def bounds(self) -> tuple[str, str] | None:
        return self.interval


@dataclass(frozen=True)
class ChangeMeasure(Column):
    """Directions the ranker fixes or breaks against its baseline, or source groups by net gain
    (``corrections_regressions``): the session adds them to the ``summarize`` row."""

    name: str
    doc: str


Measure = DirectionMeasure | PairMeasure | BaselineMeasure | IntervalMeasure | GivenPairMeasure | ChangeMeasure


@dataclass(frozen=True)
class SideColumn:
    """A Table III column: a direction measure (Table II's, or the pair-only ``unavailable`` count) on one side of
    the comparison, pair-only scoring (``l1``: the designated pair alone) or window reranking (``l2``: the ranker's
    Table II row); without a side, the Q_c both sides count (``n``)."""

    measure: DirectionMeasure
    side: Literal["l1", "l2"] | None = None

    @property
    def name(self) -> str:
        return f"{self.side}_{self.measure.name}" if self.side else self.measure.name


def interval_ends(of: DirectionMeasure | PairMeasure | GivenPairMeasure) -> tuple[IntervalMeasure, IntervalMeasure]:
    """The two columns holding a measure's 95% source-group bootstrap interval (``of.bounds``), in its units."""
    unit = "directions" if isinstance(of, DirectionMeasure) else "complete pairs"
    return tuple(IntervalMeasure(name, of.name, end, f"{'lower' if end == 'lo' else 'upper'} end of the 95% "
                                 f"source-group bootstrap interval of {of.name} ({unit} resampled with their groups)",
                                 unit=of.unit, digits=of.digits)
                 for name, end in zip(of.bounds or (), ("lo", "hi")))


def checked(table: str, columns: tuple[Measure, ...]) -> tuple[Measure, ...]:
    """``columns`` of ``table``, checked: names unique, every interval bound a column, every interval end the end
    of a column with an interval, every column shown beyond the brief labelled."""
    names = [m.name for m in columns]
    if len(names) != len(set(names)):
        raise ValueError(f"{table} names a column twice: {sorted(n for n in set(names) if names.count(n) > 1)}")
    by_name = dict(zip(names, columns))
    for m in columns:
        if m.bounds is not None and not set(m.bounds) <= set(names):
            raise ValueError(f"{table} column {m.name!r}: its interval {m.bounds} is not among the columns")
        if isinstance(m, IntervalMeasure) and by_name[m.of].bounds is None:
            raise ValueError(f"{table} column {m.name!r} bounds {m.of!r}, which has no interval")
        if m.shown - {"brief"} and not m.label:
            raise ValueError(f"{table} column {m.name!r} is shown in {sorted(m.shown)} without a label")
    return columns


def table2_order(contract: tuple[Measure, ...], uncertainty: tuple[Measure, ...],
                 changes: tuple[Measure, ...]) -> tuple[Measure, ...]:
    """Every Table II column in table2.csv's order, ``checked``; a measure with an interval is given its two ends,
    appended after the uncertainty columns when new."""
    placed = {m.of for m in uncertainty if isinstance(m, IntervalMeasure)}
    later = tuple(end for m in contract if isinstance(m, (DirectionMeasure, PairMeasure)) and m.interval
                  and m.name not in placed for end in interval_ends(m))
    return checked("Table II", (*contract, *uncertainty, *later, *changes))
