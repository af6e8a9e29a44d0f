"""The study's trained models and judgments, shipped with the frozen pools (``docs/protocol.md#shipped-reference``).

A fresh clone should not retrain the study to put one new ranker beside it: the checkout ships, under
``data/reference/``, what the embedded study's training made, each named by the same content key the cache
uses, so it is used only where this machine would compute exactly it (the same data, pools, seed, code and
library versions; another key is simply not found and the run trains as before):

- ``lambdamart/<variant>-<digest>/``: each LambdaMART model (E0, N=8's seeds and their perturbed copies), its
  ``model.txt`` and ``manifest.json``, found by ``rankers.lambdamart.train_ranker`` under the folder name it would
  train into (its input digests, the training code's included);
- ``judgments/<identity digest>.json`` and ``.parquet``: a pointwise judge's stored judgments of the study's
  windows and designated pairs (the trained cross-encoder's), found by its identity, with the cache key
  (``model_key``) its model had, so no model is trained or loaded to read them.

Each file is sealed with a plain sha256 beside it, as the frozen pools are (the checkout's, not a user's): a file
that fails its seal is refused by name and the run trains instead. What is used is copied into the user's cache and
sealed there with the user's key, like anything the run made itself. ``--retrain`` (``evaluate(retrain=True)``)
ignores this folder; ``python -m harness.freeze_reference`` writes it and ``tests/rankers/test_shipped.py`` checks
that it matches the code and that a model retrained here is the shipped one, byte for byte.
"""
from __future__ import annotations

import functools
import io
import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from fixtures.artifacts import ArtifactCorrupt, check_seal, copy_sealed, read_sealed, write_sealed
from fixtures.identity import json_digest
from fixtures.settings import PROJECT_ROOT

#: Where the checkout ships the study's trained models and judgments.
SHIPPED_DIR = PROJECT_ROOT / "data" / "reference"
#: The columns of a shipped judgments table: the score store's key after its model key, and what it stores.
JUDGMENT_COLUMNS = ("query_sha", "pid", "passage_sha", "score", "usage")


class ShippedWarning(UserWarning):
    """A shipped file failed its seal (edited or damaged): it is not used, and the run computes instead."""


def _verified(path: Path, what: str) -> bool:
    """Whether a shipped file matches its plain seal; one that does not is named in a warning, never used."""
    try:
        check_seal(path, what, keyed=False)
    except (ArtifactCorrupt, OSError) as exc:
        warnings.warn(ShippedWarning(f"shipped {what} {path}: {exc}; not used (restore it with git checkout, or "
                                     "let the run compute it)"), stacklevel=3)
        return False
    return True


def install_model(folder: str, out: Path, files: tuple[str, ...], shipped_dir: Path = SHIPPED_DIR) -> bool:
    """Copy the shipped model folder named ``folder`` (its ``files``) into ``out``, sealed with the user's key;
    False when none is shipped under that name or a file fails its seal (then ``out`` is left as it was)."""
    source = shipped_dir / "lambdamart" / folder
    if not all((source / name).is_file() for name in files):
        return False
    if not all(_verified(source / name, f"model file {name}") for name in files):
        return False
    for name in files:  # the manifest comes last in ``files``: a model without it is retrained, as a build leaves it
        copy_sealed(source / name, out / name, f"shipped model file {name}")  # the bytes checked, never a link's
    return True


def judgments_path(identity: dict[str, Any], shipped_dir: Path = SHIPPED_DIR) -> Path:
    """Where a judge of this identity's judgments are shipped (they may not be)."""
    return shipped_dir / "judgments" / f"{json_digest(identity, default=str)[:24]}.json"


@dataclass(frozen=True)
class ShippedJudgments:
    """A judge's shipped judgments: its cache key and the table of what the study's runs asked it."""

    path: Path
    model_key: str
    rows: int

    @classmethod
    def find(cls, identity: dict[str, Any], shipped_dir: Path = SHIPPED_DIR) -> ShippedJudgments | None:
        """The judgments shipped for this judge identity, or None (none shipped, or a file fails its seal)."""
        path = judgments_path(identity, shipped_dir)
        table = path.with_suffix(".parquet")
        if not path.is_file() or not table.is_file():
            return None
        return _found(path, _stamp(path), _stamp(table))

    def frame(self) -> pd.DataFrame:
        """The judgments, checked against their seal again (the file may have changed since ``find``)."""
        table = self.path.with_suffix(".parquet")
        frame = pd.read_parquet(io.BytesIO(read_sealed(table, "judgments table", keyed=False)))
        if list(frame.columns) != list(JUDGMENT_COLUMNS) or len(frame) != self.rows:
            raise ArtifactCorrupt(table, None, None, "judgments table",
                                  f"expected {self.rows} rows of {list(JUDGMENT_COLUMNS)}, found {len(frame)} rows of "
                                  f"{list(frame.columns)}")
        return frame

    def install(self, store: Any) -> int:
        """Put the judgments into the user's score store (sealed there with the user's key), unless it already holds
        this judge's; returns how many rows were written."""
        from rankers.scorers.results import CachedScore  # store records only, no model

        if store.holds(self.model_key):
            return 0
        frame = self.frame()
        rows = [((self.model_key, q, p, s), CachedScore(float(score), None, json.loads(usage), None))
                for q, p, s, score, usage in frame.itertuples(index=False, name=None)]
        store.put_many(rows)
        return len(rows)


def _stamp(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_mtime_ns, stat.st_size


@functools.lru_cache(maxsize=32)
def _found(path: Path, *_stamps: tuple[int, int]) -> ShippedJudgments | None:
    """A shipped judgments manifest read once per process while its files are unchanged (``_stamps``): a judge
    asks for it at every stage."""
    if not (_verified(path, "judgments manifest") and _verified(path.with_suffix(".parquet"), "judgments table")):
        return None
    manifest = json.loads(path.read_text(encoding="utf-8"))
    return ShippedJudgments(path, str(manifest["model_key"]), int(manifest["rows"]))


def write_judgments(identity: dict[str, Any], model_key: str, frame: pd.DataFrame,
                    shipped_dir: Path = SHIPPED_DIR) -> Path:
    """Ship a judge's judgments (``harness.freeze_reference``): the table, then its manifest, each sealed plain."""
    path = judgments_path(identity, shipped_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    frame = frame.loc[:, list(JUDGMENT_COLUMNS)].sort_values(["query_sha", "pid", "passage_sha"], kind="mergesort")
    write_sealed(path.with_suffix(".parquet"),
                 lambda p: frame.reset_index(drop=True).to_parquet(p, index=False, compression="zstd"), keyed=False)
    text = json.dumps({"identity": identity, "model_key": model_key, "rows": int(len(frame))}, indent=1,
                      sort_keys=True, default=str) + "\n"
    write_sealed(path, lambda p: p.write_text(text, encoding="utf-8"), keyed=False)
    return path
