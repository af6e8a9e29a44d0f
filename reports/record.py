"""The run record: what a run computed, as typed records (docs/architecture.md#one-run-from-evaluate-to-results).

A run records four things into one ``RecordBuilder``: rows of result tables, manifest entries,
artifacts (cached files behind the results) and stage timings. The builder turns them into one
``SplitRecord`` per split, and a ``RunRecord`` holds them with what was not evaluated and why.
The writer, the explorer, the history and the completeness check read those objects only:
nobody parses a prefixed string or a key/value frame back, and every artifact is read through
its seal (``Artifact.read``), once per run.
"""
from __future__ import annotations

import math
import shutil
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fixtures.artifacts import ArtifactCorrupt, check_seal, sealed_digest, sha256_file
from reports.tables import TABLES, directions_table

#: Artifact kinds and whether each names a ranker (``Artifact.ranker``) or a scope too (``Artifact.scope``).
ARTIFACT_KINDS: dict[str, tuple[bool, bool]] = {
    "pool": (False, False),        # the split's frozen pool snapshot (pool.parquet)
    "corpus": (False, False),      # passage texts the explorer page shows
    "population": (False, False),  # the annotated directions (qrels.txt, directions.csv)
    "top": (True, False),          # a reference ranker's top of every pool (the explorer's pool view)
    "outcomes": (True, False),     # a ranker's per-direction outcomes (directions.csv)
    "run": (True, False),          # a ranker's TREC run (runs/<ranker>.trec)
    "branches": (True, False),     # a window ranker's tie branch per direction (the explorer)
    "judgments": (True, True),     # a text scorer's judgments of one stage (judgments.csv)
}


def plain(value: Any) -> Any:
    """A value as plain JSON data (numpy scalars, NaN as None, paths as text), as a payload must be."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return None if math.isnan(float(value)) else float(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if value is pd.NA:
        return None
    if isinstance(value, Path):
        return str(value)
    return value


def profile_of(manifest: Mapping[str, Any]) -> Mapping[str, Any]:
    """A manifest's ``profile`` entry (name, file, declared rankers, samples); {} when it has none."""
    value = manifest.get("profile")
    return value if isinstance(value, Mapping) else {}


@dataclass(frozen=True)
class Artifact:
    """A sealed cached file behind the published results, named by what it holds."""

    kind: str
    path: Path
    ranker: str = ""
    scope: str = ""

    def __post_init__(self) -> None:
        if self.kind not in ARTIFACT_KINDS:
            raise ValueError(f"unknown artifact kind {self.kind!r}; known: {sorted(ARTIFACT_KINDS)}")
        ranked, scoped = ARTIFACT_KINDS[self.kind]
        if bool(self.ranker) != ranked or bool(self.scope) != scoped:
            raise ValueError(f"a {self.kind!r} artifact {'names' if ranked else 'names no'} ranker and "
                             f"{'a' if scoped else 'no'} scope (got ranker={self.ranker!r}, scope={self.scope!r})")
        object.__setattr__(self, "path", Path(self.path))

    @property
    def name(self) -> str:
        """Its name in ``manifest.json``'s ``artifacts`` (``outcomes:e0``, ``judgments:grader:pair``)."""
        return ":".join(part for part in (self.kind, self.ranker, self.scope) if part)

    def read(self) -> pd.DataFrame:
        """Its frame, refused (``ArtifactCorrupt``) unless its bytes are those its seal records."""
        check_seal(self.path, "cached result file")
        return pd.read_parquet(self.path)

    def copy_to(self, target: Path) -> None:
        """An independent copy, refused unless the copied bytes are those the seal records."""
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.path, target)
        expected = sealed_digest(self.path, "cached result file")  # refused unless sealed with the user's key
        actual = sha256_file(target)
        if actual != expected:
            raise ArtifactCorrupt(self.path, expected, actual, "cached result file")


@dataclass(frozen=True)
class NotEvaluated:
    """A failed or skipped test of a split: its rows are missing, and the report says why."""

    test: str
    outcome: str
    message: str


@dataclass(frozen=True)
class Publication:
    """What publishing adds to a split's record: the run's id and exit status, why the run is partial (empty when
    it is complete) and the split's tests that did not run to a result."""

    run_id: str
    exitstatus: int = 0
    partial: tuple[str, ...] = ()
    not_evaluated: tuple[NotEvaluated, ...] = ()


@dataclass
class SessionEnd:
    """What the end of the session did with the run: where each split was published, the history id it was saved
    under (and what a killed run had left there, removed), why it is partial, the comparisons made, and what was
    not published or went wrong."""

    published: dict[str, Path] = field(default_factory=dict)
    saved: str | None = None
    healed: str | None = None
    partial: list[str] = field(default_factory=list)
    comparison: dict[str, pd.DataFrame] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    interrupted: str | None = None


@dataclass(frozen=True)
class Declared:
    """A ranker as the run's profile declared it (its manifest entry), for labels and baselines."""

    name: str
    label: str
    compare_to: str | None = None
    reference: str | None = None


@dataclass(frozen=True)
class SplitRecord:
    """One split of a run: its result tables, manifest entries, artifacts and stage timings.

    Artifact frames and the directions table are read once per record and shared by every
    output that shows them (``frame``, ``directions``).
    """

    split: str
    tables: Mapping[str, pd.DataFrame]
    entries: Mapping[str, Any] = field(default_factory=dict)
    artifacts: tuple[Artifact, ...] = ()
    stages: pd.DataFrame | None = None
    #: Artifact frames read so far, by name; shared by the records ``with_table`` derives from this one.
    _frames: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False, compare=False)

    @property
    def profile(self) -> Mapping[str, Any]:
        return profile_of(self.entries)

    @property
    def profile_name(self) -> str | None:
        name = self.profile.get("name")
        return str(name) if name is not None else None

    @cached_property
    def declared(self) -> dict[str, Declared]:
        """The profile's ranker declarations recorded in the manifest (name -> ``Declared``)."""
        rankers = self.profile.get("rankers")
        if not isinstance(rankers, Mapping):
            return {}
        return {str(name): Declared(str(name), str(d.get("label") or name), d.get("compare_to") or None,
                                    d.get("reference") or None)
                for name, d in rankers.items() if isinstance(d, Mapping)}

    def label(self, ranker: str) -> str:
        decl = self.declared.get(ranker)
        return decl.label if decl is not None else ranker

    def artifact(self, kind: str, ranker: str = "", scope: str = "") -> Artifact | None:
        """The artifact of that name, None when the run recorded none (an unknown kind is refused)."""
        return self._by_name.get(Artifact(kind, Path(), ranker, scope).name)

    def of_kind(self, kind: str) -> tuple[Artifact, ...]:
        return tuple(a for a in self.artifacts if a.kind == kind)

    @cached_property
    def _by_name(self) -> dict[str, Artifact]:
        return {a.name: a for a in self.artifacts}

    def frame(self, artifact: Artifact) -> pd.DataFrame:
        """An artifact's frame, read through its seal once per record (callers must not modify it)."""
        if artifact.name not in self._frames:
            self._frames[artifact.name] = artifact.read()
        return self._frames[artifact.name]

    @property
    def rankers(self) -> list[str]:
        """Table II's rankers, in its order."""
        return [str(r) for r in self.tables["table2"]["ranker"]] if "table2" in self.tables else []

    @cached_property
    def directions(self) -> pd.DataFrame | None:
        """``directions.csv``: every planned direction with each ranker's outcomes; None without a population."""
        population = self.artifact("population")
        if population is None:
            return None
        outcomes = {r: self.frame(a) for r in self.rankers if (a := self.artifact("outcomes", r)) is not None}
        return directions_table(self.frame(population), outcomes)

    def with_table(self, name: str, frame: pd.DataFrame) -> SplitRecord:
        """The record with one more (or another) table; the artifact frames already read stay read."""
        return replace(self, tables={**self.tables, name: frame})

    def manifest(self, publication: Publication) -> dict[str, Any]:
        """``manifest.json`` before its ``explore`` and ``files`` entries: the recorded entries, stage wall-clock
        and artifacts, and what publishing adds."""
        manifest: dict[str, Any] = dict(self.entries)
        if self.stages is not None:
            manifest["stages_wall_clock"] = {r["stage"]: {k: v for k, v in r.items() if k != "stage" and pd.notna(v)}
                                             for r in self.stages.to_dict("records")}
        if self.artifacts:
            manifest["artifacts"] = {a.name: str(a.path) for a in self.artifacts}
        manifest["run_id"] = publication.run_id
        manifest["pytest_exit_status"] = publication.exitstatus
        manifest["not_evaluated"] = [asdict(entry) for entry in publication.not_evaluated]
        tables = self.tables
        manifest["unavailable"] = unavailable_summary(tables["unavailable"]) if "unavailable" in tables else {}
        manifest["endpoints"] = endpoint_summary_of(tables["endpoints"]) if "endpoints" in tables else {}
        manifest["partial"] = list(publication.partial)
        return manifest


def unavailable_summary(frame: pd.DataFrame) -> dict[str, dict[str, dict[str, Any]]]:
    """The ``unavailable`` table as ranker -> scope -> inputs, unavailable, causes (cause -> count), replies_capped."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for row in frame.to_dict("records"):
        entry = out.setdefault(str(row["ranker"]), {}).setdefault(str(row["scope"]), {
            "inputs": int(row["inputs"]), "unavailable": 0, "causes": {}, "replies_capped": 0})
        if row["issue"] == "capped":
            entry["replies_capped"] += int(row["count"])
        else:
            entry["unavailable"] += int(row["count"])
            entry["causes"][str(row["cause"])] = int(row["count"])
    return out


def endpoint_summary_of(frame: pd.DataFrame) -> dict[str, dict[str, dict[str, Any]]]:
    """The ``endpoints`` table as ranker -> scope -> endpoint -> judgments, resent, taken_out (reason or None)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for row in frame.to_dict("records"):
        reason = row.get("taken_out")
        out.setdefault(str(row["ranker"]), {}).setdefault(str(row["scope"]), {})[str(row["endpoint"])] = {
            "judgments": int(row["judgments"]), "resent": int(row["resent"]),
            "taken_out": None if reason is None or pd.isna(reason) else str(reason)}
    return out


#: ``RunRecord.failures``' columns: a part of the run that failed or did not apply, and why.
FAILURE_COLUMNS = ("split", "part", "ranker", "outcome", "cause")


@dataclass(frozen=True)
class RunRecord:
    """A whole run: one ``SplitRecord`` per evaluated split, what was not evaluated (and why), and why the run is
    partial (empty: it computed every part its profile declares). What ``harness.run.evaluate`` returns, what the
    specs assert over and what ``publish`` writes."""

    splits: Mapping[str, SplitRecord]
    not_evaluated: Mapping[str, tuple[NotEvaluated, ...]] = field(default_factory=dict)
    partial: tuple[str, ...] = ()
    #: One row per part of the run that failed or did not apply: split, part, ranker, outcome, cause.
    failures: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(FAILURE_COLUMNS)))

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
        """A ranker's per-direction outcomes on a split (qid, ranks, strict, tie, fallback), read through the seal."""
        record = self[split]
        artifact = record.artifact("outcomes", ranker)
        if artifact is None:
            raise KeyError(f"{split}: no outcomes of ranker {ranker!r} in this run (rankers: {record.rankers})")
        return record.frame(artifact).copy()

    def failing(self, split: str, ranker: str) -> pd.DataFrame:
        """The directions a ranker does not strictly prefer correctly (ties and fallbacks included), with their
        queries' pair, group and designated passages: where to look first."""
        record = self[split]
        population = record.artifact("population")
        outcomes = self.outcomes(split, ranker)
        lost = outcomes[~outcomes["strict"].astype(bool)]
        if population is None:
            return lost.reset_index(drop=True)
        about = record.frame(population)[["qid", "pair_id", "group", "query", "preferred_pid", "counterpart_pid"]]
        return lost.merge(about, on="qid", how="left").reset_index(drop=True)


def _identity(table: str, row: Mapping[str, Any]) -> tuple:
    """A row's identifying values in its table (``TABLES``): a later row with the same identity replaces it."""
    if table not in TABLES:
        raise KeyError(f"unknown report table {table!r}; known: {sorted(TABLES)}")
    missing = [k for k in TABLES[table][1] if k not in row]
    if missing:
        raise KeyError(f"row for {table} lacks identifying columns {missing}")
    return tuple(row[k] for k in TABLES[table][1])


class RecordBuilder:
    """Collects what a run computes, split by split, and builds its ``SplitRecord``s.

    Rows are placed by their declared ``order`` (a ranker's place in the profile), then by their
    identifying columns, so the order they were computed in never changes a published file.
    """

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], dict[tuple, tuple[float, dict[str, Any]]]] = {}
        self.entries: dict[str, dict[str, Any]] = {}
        self.artifacts: dict[str, dict[str, Artifact]] = {}
        self.stages: dict[str, dict[str, dict[str, Any]]] = {}

    def add(self, table: str, split: str, row: Mapping[str, Any], order: float | None = None) -> None:
        """A result-table row; ``order`` places it within its table (declared ranker order), else its
        identifying columns do."""
        ident = _identity(table, row)
        self.rows.setdefault((split, table), {})[ident] = (math.inf if order is None else float(order),
                                                           plain(dict(row)))

    def entry(self, split: str, key: str, value: Any) -> None:
        """A manifest entry (``manifest.json``): what a number came from."""
        self.entries.setdefault(split, {})[key] = plain(value)

    def artifact(self, split: str, artifact: Artifact) -> None:
        """A sealed cached file behind the split's published files."""
        self.artifacts.setdefault(split, {})[artifact.name] = artifact

    def stage(self, split: str, row: Mapping[str, Any]) -> None:
        """The wall-clock of a stage (``manifest.json``'s ``stages_wall_clock``)."""
        self.stages.setdefault(split, {})[str(row["stage"])] = plain(dict(row))

    def table_rows(self, split: str, table: str) -> list[dict[str, Any]]:
        """The rows of one table of one split recorded so far (computation order; ``tables`` orders them)."""
        return [row for _, row in self.rows.get((split, table), {}).values()]

    def row(self, split: str, table: str, *ident: Any) -> dict[str, Any]:
        """The row of ``table`` with these identifying values (KeyError naming them when none was recorded)."""
        try:
            return self.rows[(split, table)][ident][1]
        except KeyError:
            raise KeyError(f"{split}: no {table} row {ident} recorded") from None

    @property
    def recorded(self) -> set[str]:
        """The splits anything was recorded for."""
        return {split for split, _ in self.rows} | set(self.entries) | set(self.artifacts) | set(self.stages)

    def tables(self) -> dict[str, dict[str, pd.DataFrame]]:
        """Per split, every table with rows, its rows in order."""
        out: dict[str, dict[str, pd.DataFrame]] = {}
        for (split, table), rows in sorted(self.rows.items()):
            ordered = sorted(rows.items(), key=lambda item: (item[1][0], item[0]))
            out.setdefault(split, {})[table] = pd.DataFrame([row for _, (_, row) in ordered])
        return out

    def records(self) -> dict[str, SplitRecord]:
        """One record per split that has result rows: its tables, manifest entries, artifacts and stages."""
        records = {}
        for split, tables in self.tables().items():
            stages = self.stages.get(split)
            records[split] = SplitRecord(
                split, tables, self.entries.get(split, {}),
                tuple(a for _, a in sorted(self.artifacts.get(split, {}).items())),
                pd.DataFrame([row for _, row in sorted(stages.items())]) if stages else None)
        return records
