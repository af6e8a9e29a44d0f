"""Content-keyed memos: a warm run reads what an earlier run derived from exactly the same inputs.

A memo's key is a digest of everything its value depends on — input files' digests, the
source of the code that computes it, library versions, declared options — so a changed
input, a code edit or an upgraded library gives a new key and the value is recomputed;
nothing is ever invalidated by hand. Values are pickled, sealed (``fixtures.artifacts``)
and checked on read: an altered memo is named, discarded and recomputed.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.metadata as md
import json
import pickle
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from fixtures.artifacts import ArtifactCorrupt, check_seal, discard, write_sealed
from fixtures.settings import PROJECT_ROOT

T = TypeVar("T")


class MemoWarning(UserWarning):
    """A memo failed its seal and is being recomputed."""


@functools.cache
def source_digest(*patterns: str) -> str:
    """Digest of the project's source files matching the glob patterns (relative to the checkout)."""
    h = hashlib.sha256()
    for pattern in patterns:
        for path in sorted(PROJECT_ROOT.glob(pattern)):
            h.update(str(path.relative_to(PROJECT_ROOT)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:24]


def versions(*distributions: str) -> dict[str, str | None]:
    """Installed versions, read from metadata (importing a heavy library just to ask would defeat the memo)."""
    out: dict[str, str | None] = {}
    for name in distributions:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    return out


def digest(parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:24]


def items_digest(items: Iterable[tuple[Any, ...]]) -> str:
    """Order-independent digest of rows (e.g. (qid, pid, score) of a ranker's text scores)."""
    h = hashlib.sha256()
    for row in sorted(repr(tuple(r)) for r in items):
        h.update(row.encode())
    return h.hexdigest()[:24]


class Memo:
    """Pickled values under ``<root>/<kind>-<digest>.pkl``, sealed."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def path(self, kind: str, parts: object) -> Path:
        return self.root / f"{kind}-{digest(parts)}.pkl"

    def get(self, kind: str, parts: object, compute: Callable[[], T]) -> T:
        path = self.path(kind, parts)
        if path.is_file():
            try:
                check_seal(path, f"memo {kind}")
                with open(path, "rb") as fh:
                    return pickle.load(fh)
            except (ArtifactCorrupt, pickle.UnpicklingError, EOFError, OSError) as exc:
                warnings.warn(MemoWarning(f"{exc}; recomputing it"), stacklevel=2)
                discard(path)
        value = compute()
        write_sealed(path, lambda p: p.write_bytes(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)))
        return value
