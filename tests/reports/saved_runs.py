"""Runs kept in the history for the history tests: a split's record with sealed outcome and population artifacts,
published (a table2.csv and a manifest.json) and saved the way a run saves it (``reports.history``)."""
from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from fixtures.artifacts import write_sealed
from reports.history import FIELDS, Saved, save_to_history
from reports.record import Artifact, SplitRecord

MANIFEST = {"profile": {"name": "embedded"}, "scope": "full", "pool": {"parquet_sha256": "abc"},
            "margins": {"strict": 1.0}}


def _sealed(path: Path, frame: pd.DataFrame) -> Path:
    write_sealed(path, lambda p: frame.to_parquet(p, index=False))
    return path


def split_record(folder: Path, split: str, table2: pd.DataFrame, directions: pd.DataFrame,
                 entries: Mapping | None = None) -> SplitRecord:
    """A split's record: ``directions`` holds ``qid``, ``group`` and each ranker's ``<ranker>__<field>`` columns
    (``reports.history.FIELDS``) of the rankers in ``table2``."""
    folder.mkdir(parents=True, exist_ok=True)
    artifacts = [Artifact("population", _sealed(folder / f"{split}-population.parquet", directions[["qid", "group"]]))]
    for ranker in table2["ranker"]:
        frame = directions[["qid"]].assign(**{f: directions[f"{ranker}__{f}"] for f in FIELDS})
        artifacts.append(Artifact("outcomes", _sealed(folder / f"{split}-{ranker}.parquet", frame), ranker=ranker))
    return SplitRecord(split, {"table2": table2}, dict(MANIFEST if entries is None else entries), tuple(artifacts))


def save(results: Path, ident: str, records: Mapping[str, SplitRecord]) -> Saved:
    """Publish the records' Table II and manifest under ``<results>/<split>`` and keep them in the history."""
    published = {}
    for split, record in records.items():
        folder = results / split
        folder.mkdir(parents=True, exist_ok=True)
        record.tables["table2"].to_csv(folder / "table2.csv", index=False)
        (folder / "manifest.json").write_text(json.dumps({**record.entries, "run_id": ident}), encoding="utf-8")
        published[split] = folder
    return save_to_history(results, ident, records, published)


def small_run(folder: Path, strict_shift: int = 0) -> dict[str, SplitRecord]:
    """A run of two splits, 40 directions each in groups of four, one ranker (fusion)."""
    records = {}
    for split in ("test", "confirmation"):
        directions = pd.DataFrame({"qid": [f"{split}_q{i}" for i in range(40)],
                                   "group": [f"g{i // 4}" for i in range(40)],
                                   "fusion__strict": [(i + strict_shift) % 3 == 0 for i in range(40)],
                                   "fusion__rank_pos": [1 + i % 5 for i in range(40)],
                                   "fusion__rank_neg": [2 + i % 5 for i in range(40)],
                                   "fusion__tie": False, "fusion__fallback": False})
        table2 = pd.DataFrame([{"ranker": "fusion", "n": 40, "strict": int(directions["fusion__strict"].sum()),
                                "mrr": 0.5}])
        records[split] = split_record(folder, split, table2, directions)
    return records
