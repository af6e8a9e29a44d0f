"""The run record: a whole run as typed records (docs/architecture.md#one-run-from-evaluate-to-results).

``RunRecord`` holds one ``reports.record.SplitRecord`` per evaluated split, the outcome of every part the run
computed (``PartOutcome``: the checks its verdicts imply, its error, or why it did not apply) and why the run is
partial. It is what ``harness.run.evaluate`` returns, what the specs assert over and what publishing writes; the
checks it keeps are those the specs enforce, so a notebook sees the same verdicts and failures as CI.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pandas as pd

from reports.record import NotEvaluated, SplitRecord


#: What a check asks of a run (docs/statistics.md#claims): a warning, a failure, or an expected failure (xfail).
CHECK_ACTIONS = ("warn", "fail", "xfail")


@dataclass(frozen=True)
class Check:
    """What a verdict asks of the run (a claim's reviewed expectation, a gate, a pin): a warning (``category``), a
    failure, or an expected failure. The record keeps them, so a notebook sees what the specs enforce."""

    action: str
    message: str
    category: type[Warning] | None = None

    def __post_init__(self) -> None:
        if self.action not in CHECK_ACTIONS:
            raise ValueError(f"check action must be one of {CHECK_ACTIONS}, got {self.action!r}")


#: A part of a run: (part name, split, parameter id; "" for a part of the split alone).
PartKey = tuple[str, str, str]


@dataclass(frozen=True)
class PartOutcome:
    """What computing one part of a run gave: the checks its verdicts imply, or the error it failed with, or why it
    did not apply (``skipped``)."""

    checks: tuple[Check, ...] = ()
    error: BaseException | None = None
    skipped: str | None = None
    #: The rankers the part computes (its parameter's), for the failures table.
    rankers: tuple[str, ...] = ()

    @property
    def outcome(self) -> str:
        return "failed" if self.error is not None else "skipped" if self.skipped is not None else "computed"

    @property
    def cause(self) -> str:
        if self.error is not None:
            return f"{type(self.error).__name__}: {self.error}"
        return self.skipped or ""


def part_name(key: PartKey) -> str:
    """A part's name in the report and the failures table: ``table2_row[test-ce]``, ``manifest[test]``."""
    part, split, param = key
    return f"{part}[{split}{'-' + param if param else ''}]"


#: ``RunRecord.failures``' and ``RunRecord.skipped``'s columns: a part of the run that failed (or did not apply), and
#: why.
FAILURE_COLUMNS = ("split", "part", "ranker", "outcome", "cause")
#: ``RunRecord.checks``' columns: what each part's verdicts ask of the run.
CHECK_COLUMNS = ("split", "part", "action", "category", "message")


class RankerLost(RuntimeError):
    """A ranker failed in every part of a run (``RunRecord.lost_rankers``): raised with the first cause, the
    record kept on ``record`` (everything else the run computed is in it)."""

    def __init__(self, record: RunRecord, lost: Mapping[str, tuple[PartKey, PartOutcome]]) -> None:
        self.record = record
        first = next(iter(lost.items()))
        super().__init__(
            f"ranker(s) {sorted(lost)} failed in every part of the run, so they have no row; the first cause, in "
            f"{part_name(first[1][0])} of {first[0]!r}: {first[1][1].cause} (the rest of the run is on this error's "
            f".record; .record.failures lists every failed part)")


@dataclass(frozen=True)
class RunRecord:
    """A whole run: one ``SplitRecord`` per evaluated split, the outcome of every part it computed (with the checks
    its verdicts imply), and why the run is partial (empty: it computed every part its profile declares, and none
    failed). What ``harness.run.evaluate`` returns, what the specs assert over and what ``publish`` writes."""

    splits: Mapping[str, SplitRecord]
    parts: Mapping[PartKey, PartOutcome] = field(default_factory=dict)
    partial: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        return not self.partial

    def part(self, name: str, split: str, parameter: str = "") -> PartOutcome:
        """The outcome of one part (``KeyError`` naming it when this run did not compute it)."""
        try:
            return self.parts[(name, split, parameter)]
        except KeyError:
            raise KeyError(f"this run did not compute part {part_name((name, split, parameter))}") from None

    def _outcomes(self, which: str) -> pd.DataFrame:
        rows = [{"split": key[1], "part": key[0], "ranker": ",".join(out.rankers), "outcome": out.outcome,
                 "cause": out.cause} for key, out in self.parts.items() if out.outcome == which]
        return pd.DataFrame(rows, columns=list(FAILURE_COLUMNS))

    @property
    def failures(self) -> pd.DataFrame:
        """One row per part that failed: split, part, ranker(s), outcome and cause (its error)."""
        return self._outcomes("failed")

    @property
    def skipped(self) -> pd.DataFrame:
        """One row per part that did not apply or that this machine cannot run, with the reason."""
        return self._outcomes("skipped")

    @property
    def checks(self) -> pd.DataFrame:
        """Every check the run's verdicts imply (``fail`` rows: what a spec or CI fails on), part by part."""
        rows = [{"split": key[1], "part": part_name(key), "action": check.action,
                 "category": check.category.__name__ if check.category is not None else "", "message": check.message}
                for key, out in self.parts.items() for check in out.checks]
        return pd.DataFrame(rows, columns=list(CHECK_COLUMNS))

    def lost_rankers(self) -> dict[str, tuple[PartKey, PartOutcome]]:
        """Each ranker none of whose parts was computed and at least one failed, with its first failed part: a ranker
        with no row anywhere, which ``harness.run.evaluate`` raises on instead of returning a record missing it."""
        parts: dict[str, list[tuple[PartKey, PartOutcome]]] = {}
        for key, outcome in self.parts.items():
            for ranker in outcome.rankers:
                parts.setdefault(ranker, []).append((key, outcome))
        return {ranker: next(p for p in its if p[1].error is not None) for ranker, its in parts.items()
                if any(o.error is not None for _, o in its) and not any(o.outcome == "computed" for _, o in its)}

    @property
    def not_evaluated(self) -> dict[str, tuple[NotEvaluated, ...]]:
        """Per split, the parts that failed or did not apply, as the report lists them."""
        out: dict[str, list[NotEvaluated]] = {}
        for key, outcome in self.parts.items():
            if outcome.outcome != "computed":
                out.setdefault(key[1], []).append(NotEvaluated(part_name(key), outcome.outcome, outcome.cause))
        return {split: tuple(entries) for split, entries in out.items()}

    def __getitem__(self, split: str) -> SplitRecord:
        try:
            return self.splits[split]
        except KeyError:
            raise KeyError(f"split {split!r} was not evaluated in this run (evaluated: {sorted(self.splits)})") \
                from None

    def table(self, name: str) -> pd.DataFrame:
        """One result table of every split, stacked, with a leading ``split`` column (empty when none has it)."""
        frames = [frame.assign(split=split)[["split", *frame.columns]]
                  for split, record in self.splits.items() if (frame := record.tables.get(name)) is not None]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["split"])

    @property
    def table1(self) -> pd.DataFrame:
        return self.table("table1")

    @property
    def table2(self) -> pd.DataFrame:
        return self.table("table2")

    @property
    def claims(self) -> pd.DataFrame:
        return self.table("claims")

    def outcomes(self, split: str, ranker: str) -> pd.DataFrame:
        """A ranker's per-direction outcomes on a split (qid, ranks, strict, tie, fallback), read through the seal,
        with each direction's designated passages (``preferred_pid``, ``counterpart_pid``) where the run recorded
        its population: a row names the passages it is about."""
        record = self[split]
        artifact = record.artifact("outcomes", ranker)
        if artifact is None:
            raise KeyError(f"{split}: no outcomes of ranker {ranker!r} in this run (rankers: {record.rankers})")
        outcomes = record.frame(artifact).copy()
        population = record.artifact("population")
        if population is None or "preferred_pid" in outcomes:
            return outcomes
        passages = record.frame(population)[["qid", "preferred_pid", "counterpart_pid"]]
        return outcomes.merge(passages, on="qid", how="left", validate="one_to_one")

    def failing(self, split: str, ranker: str) -> pd.DataFrame:
        """The directions a ranker does not strictly prefer correctly (ties and fallbacks included), with their
        queries' pair, group and designated passages: where to look first."""
        record = self[split]
        population = record.artifact("population")
        outcomes = self.outcomes(split, ranker)
        lost = outcomes[~outcomes["strict"].astype(bool)]
        if population is None:
            return lost.reset_index(drop=True)
        about = record.frame(population)[["qid", "pair_id", "group", "query"]]
        return lost.merge(about, on="qid", how="left").reset_index(drop=True)
