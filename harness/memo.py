"""Content-keyed memos: a warm run reads what an earlier run derived from exactly the same inputs.

A memo's key is a digest of everything its value depends on — input files' digests, the
code that computes it and the libraries it imports (``fixtures.code``), declared options —
so a changed input, a code edit or an upgraded library gives a new key and the value is
recomputed; nothing is ever invalidated by hand (``docs/protocol.md#caches``). Values are
pickled, sealed (``fixtures.artifacts``) and checked on read: an altered memo is named,
discarded and recomputed.
"""
from __future__ import annotations

import hashlib
import pickle
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from fixtures.artifacts import ArtifactCorrupt, check_seal, discard, write_sealed
from fixtures.identity import frame_digest, json_digest

T = TypeVar("T")


class MemoWarning(UserWarning):
    """A memo failed its seal and is being recomputed."""


def digest(parts: object) -> str:
    """Digest of JSON-able parts (dict keys in any order)."""
    return json_digest(parts, default=str)[:24]


def items_digest(items: Iterable[tuple[Any, ...]]) -> str:
    """Order-independent digest of rows (e.g. (qid, pid, score) of a ranker's text scores)."""
    h = hashlib.sha256()
    for row in sorted(repr(tuple(r)) for r in items):
        h.update(row.encode())
    return h.hexdigest()[:24]


def texts_digest(rows: Iterable[tuple[str, ...]]) -> str:
    """Digest of rows of texts in their order (e.g. a judging stage's (qid, pid, query, passage) inputs)."""
    h = hashlib.sha256()
    for row in rows:
        h.update(b"".join(str(text).encode() + b"\0" for text in row) + b"\1")
    return h.hexdigest()[:24]


def content(value: object) -> object:
    """A value as it enters a memo key: a frame by its columns, dtypes, row hashes and attrs (a ranker's outcomes carry
    its name there); an array by its bytes; anything else as it is (JSON-able)."""
    if isinstance(value, pd.DataFrame):
        return digest([[str(c) for c in value.columns], [str(t) for t in value.dtypes], frame_digest(value),
                       {str(k): v for k, v in value.attrs.items()}])
    if isinstance(value, np.ndarray):
        return digest([str(value.dtype), value.shape, value.tolist()])
    return value


class Memo:
    """Pickled values under ``<root>/<label>-<digest of parts>.pkl``, sealed; ``label`` says what a value is."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def path(self, label: str, parts: object) -> Path:
        return self.root / f"{label}-{digest(parts)}.pkl"

    def get(self, label: str, parts: object, compute: Callable[[], T], keep: Callable[[T], bool] | None = None) -> T:
        """The value kept under ``parts``, else ``compute()``, kept unless ``keep`` says it is not final."""
        path = self.path(label, parts)
        if path.is_file():
            try:
                check_seal(path, f"memo {label}")
                with open(path, "rb") as fh:
                    return pickle.load(fh)
            except (ArtifactCorrupt, pickle.UnpicklingError, EOFError, OSError) as exc:
                warnings.warn(MemoWarning(f"{exc}; recomputing it"), stacklevel=2)
                discard(path)
        value = compute()
        if keep is not None and not keep(value):
            return value
        write_sealed(path, lambda p: p.write_bytes(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)))
        return value
