"""A split's record: what a run computed for one split, as typed records
(docs/architecture.md#one-run-from-evaluate-to-results).

A run records four things (``reports.record_builder.RecordBuilder``): rows of result tables, manifest entries,
artifacts (cached files behind the results) and stage timings; they become one ``SplitRecord`` per split, and a
``reports.run_record.RunRecord`` holds those with every part's outcome and why the run is partial.
The writer, the explorer, the history and the completeness check read those objects only:
nobody parses a prefixed string or a key/value frame back, and every artifact is read through
its seal (``Artifact.read``), once per run.
"""
from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fixtures.artifacts import read_sealed
from reports.claim_families import seed_words
from reports.table_registry import TABLES
from reports.tables import directions_table

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
        """Its frame, refused (``ArtifactCorrupt``) unless its bytes are those its seal records under the user's
        key; the bytes parsed are those checked (``fixtures.artifacts.read_sealed``: never through a link)."""
        return pd.read_parquet(io.BytesIO(read_sealed(self.path, "cached result file")))

    def copy_to(self, target: Path) -> None:
        """An independent copy, refused unless the bytes are those the seal records: checked before a byte is
        written, so a refused file (a link to a user's key, say) is never copied."""
        data = read_sealed(self.path, "cached result file")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


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
    under (and what a killed run had left there, removed), the line naming what publishing kept because the suite
    did not write it (each entry named once), why it is partial, the comparisons made, and what was not
    published or went wrong."""

    published: dict[str, Path] = field(default_factory=dict)
    saved: str | None = None
    healed: str | None = None
    kept: str | None = None
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

    @cached_property
    def seed_of_rows(self) -> dict[str, str]:
        """Which seed Table II's row of each ranker trained with several seeds is (the run's own: ``seed 13``, in the
        words every output uses, ``reports.claim_families.seed_words``); seeds.csv names the rankers."""
        seeds = self.tables.get("seeds")
        seed = (self.entries.get("settings") or {}).get("seed")
        if seeds is None or not len(seeds) or seed is None:
            return {}
        return {str(r): seed_words([int(seed)]) for r in seeds["ranker"].unique()}

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

    def rows(self, table: str) -> pd.DataFrame:
        """One result table's rows (an empty frame when the run recorded none), values typed (NaN as NaN)."""
        frame = self.tables.get(table)
        return frame if frame is not None else pd.DataFrame(columns=list(TABLES[table].keys))

    def row(self, table: str, *ident: Any) -> pd.Series:
        """The row of ``table`` with these identifying values (``KeyError`` naming them when there is none)."""
        columns = list(TABLES[table].keys)
        frame = self.rows(table)
        found = frame[np.logical_and.reduce([frame[c] == v for c, v in zip(columns, ident)])] if len(frame) else frame
        if len(found) != 1:
            raise KeyError(f"{self.split}: no {table} row {ident} recorded")
        return found.iloc[0]

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
