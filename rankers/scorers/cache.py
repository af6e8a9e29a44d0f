"""The persistent text-score cache shared by every scorer (SPEC §3 "Every text score is cached").

One SQLite file in WAL mode: concurrent pytest-xdist workers can read and write it,
an interrupted run keeps every committed batch, and the tables can be rebuilt from it
alone on a CPU. A score is keyed by everything that determines it — the scorer's
``model_key`` (model id, revision, prompt/preprocessing version), the query text's
sha256, the passage id and the passage text's sha256 — so pair-only (L1) and window
(L2) scoring share inputs, and a changed model, prompt or text can never reuse a
stale score.
"""
from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from fixtures.corpus import text_hash
from fixtures.settings import Settings
from rankers.scorers.base import ScoreBatch, TextScorer

CACHE_FILE = "text_scores.sqlite"
#: Identity of one score: (model_key, query sha256, pid, passage sha256).
CacheKey = tuple[str, str, str, str]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS scores (
    model_key TEXT NOT NULL,
    query_sha TEXT NOT NULL,
    pid TEXT NOT NULL,
    passage_sha TEXT NOT NULL,
    score REAL,
    error TEXT,
    usage TEXT NOT NULL DEFAULT '{}',
    raw TEXT,
    created REAL NOT NULL,
    PRIMARY KEY (model_key, query_sha, pid, passage_sha)
) WITHOUT ROWID
"""


@dataclass(frozen=True)
class CachedScore:
    """A stored result: ``score`` is None when the input was unavailable, ``error`` then says why."""

    score: float | None
    error: str | None
    usage: dict[str, float]
    raw: str | None

    @property
    def available(self) -> bool:
        return self.score is not None and bool(np.isfinite(self.score))


class ScoreCache:
    """SQLite-backed store of text scores; safe across processes (WAL, busy timeout)."""

    def __init__(self, path: Path, timeout_s: float = 120.0) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(self.path, timeout=timeout_s, isolation_level=None)
        self._conn.execute("PRAGMA busy_timeout = %d" % int(timeout_s * 1000))
        self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute("PRAGMA synchronous = NORMAL")
        self._conn.execute(_SCHEMA)

    @classmethod
    def for_settings(cls, settings: Settings) -> ScoreCache:
        """The run's shared cache: ``<cache_dir>/scores/text_scores.sqlite``."""
        return cls(settings.cache("scores") / CACHE_FILE)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> ScoreCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get_many(self, keys: Iterable[CacheKey]) -> dict[CacheKey, CachedScore]:
        """Stored results for the given keys (absent keys are simply missing from the answer)."""
        keys = list(keys)
        out: dict[CacheKey, CachedScore] = {}
        if not keys:
            return out
        # A temporary table keeps the lookup one indexed join however many keys are asked for.
        cur = self._conn.cursor()
        cur.execute("CREATE TEMP TABLE IF NOT EXISTS wanted (model_key TEXT, query_sha TEXT, pid TEXT, passage_sha TEXT)")
        cur.execute("DELETE FROM wanted")
        cur.executemany("INSERT INTO wanted VALUES (?, ?, ?, ?)", keys)
        rows = cur.execute(
            "SELECT s.model_key, s.query_sha, s.pid, s.passage_sha, s.score, s.error, s.usage, s.raw "
            "FROM wanted w JOIN scores s USING (model_key, query_sha, pid, passage_sha)").fetchall()
        cur.execute("DELETE FROM wanted")
        for mk, qs, pid, ps, score, error, usage, raw in rows:
            out[(mk, qs, pid, ps)] = CachedScore(score, error, json.loads(usage), raw)
        return out

    def put_many(self, rows: Sequence[tuple[CacheKey, CachedScore]]) -> None:
        """Store results in one transaction (all or nothing), replacing older results for the same keys."""
        now = time.time()
        params = [(*key, _finite_or_none(r.score), r.error, json.dumps(r.usage, sort_keys=True), r.raw, now)
                  for key, r in rows]
        cur = self._conn.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            cur.executemany("INSERT OR REPLACE INTO scores VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", params)
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        cur.execute("COMMIT")

    def delete(self, keys: Iterable[CacheKey]) -> int:
        """Forget results (e.g. to force a rescore); returns how many rows went."""
        cur = self._conn.cursor()
        before = self._conn.total_changes
        cur.execute("BEGIN IMMEDIATE")
        cur.executemany("DELETE FROM scores WHERE model_key=? AND query_sha=? AND pid=? AND passage_sha=?", list(keys))
        cur.execute("COMMIT")
        return self._conn.total_changes - before

    def count(self, model_key: str | None = None) -> int:
        if model_key is None:
            return self._conn.execute("SELECT COUNT(*) FROM scores").fetchone()[0]
        return self._conn.execute("SELECT COUNT(*) FROM scores WHERE model_key=?", (model_key,)).fetchone()[0]

    def model_keys(self) -> list[str]:
        return [r[0] for r in self._conn.execute("SELECT DISTINCT model_key FROM scores ORDER BY model_key")]


def _finite_or_none(score: float | None) -> float | None:
    if score is None:
        return None
    score = float(score)
    return score if np.isfinite(score) else None


def cache_key(model_key: str, pid: str, query: str, passage: str) -> CacheKey:
    return (model_key, text_hash(query), pid, text_hash(passage))


class CacheIncompleteError(RuntimeError):
    """Raised in cache-only mode when some inputs were never scored."""


@dataclass(frozen=True)
class ScoredInputs:
    """Results aligned with the caller's inputs, plus what this call had to compute.

    ``frame``: one row per input (duplicates kept) with qid, pid, score (NaN when
    unavailable), error, usage (dict), raw, cached (True when read from the cache).
    """

    frame: pd.DataFrame
    n_unique: int
    n_scored: int
    n_cached: int
    model_key: str
    stats: dict[str, float] = field(default_factory=dict)

    @property
    def scores(self) -> dict[tuple[str, str], float]:
        """(qid, pid) -> score (NaN when unavailable), the mapping ``window_rerank`` reads."""
        return dict(zip(zip(self.frame["qid"], self.frame["pid"]), self.frame["score"].astype(float)))

    @property
    def n_unavailable(self) -> int:
        return int(self.frame.drop_duplicates(["qid", "pid"])["score"].isna().sum())


def score_with_cache(scorer: TextScorer, inputs: Sequence[tuple[str, str, str, str]], cache: ScoreCache,
                     batch_size: int = 64, progress: bool = True, *, cache_only: bool = False,
                     retry_unavailable: bool = False, desc: str | None = None) -> ScoredInputs:
    """Score ``(qid, pid, query_text, passage_text)`` inputs, computing only what the cache lacks.

    Identical inputs (same query text, pid, passage text) are scored once. Each batch is
    committed as soon as it is scored, so an interruption loses at most the batch in
    flight. The scorer receives (query text, passage text) tuples and nothing else.
    Unavailable results are stored with their reason and retried only on
    ``retry_unavailable``; ``cache_only`` never calls the scorer and fails when anything
    is missing.
    """
    model_key = scorer.model_key
    rows = [(str(q), str(p), str(qt), str(pt)) for q, p, qt, pt in inputs]
    keys = [cache_key(model_key, p, qt, pt) for _, p, qt, pt in rows]
    unique: dict[CacheKey, tuple[str, str]] = {}
    for key, (_, _, qt, pt) in zip(keys, rows):
        unique.setdefault(key, (qt, pt))

    found = cache.get_many(unique)
    todo = [k for k in unique if k not in found or (retry_unavailable and not found[k].available)]
    if cache_only and todo:
        raise CacheIncompleteError(
            f"cache-only scoring with {model_key!r}: {len(todo)} of {len(unique)} unique inputs are not in "
            f"{cache.path} (e.g. pid {todo[0][2]!r}); run the scorer once without cache_only to fill it")

    started = time.perf_counter()
    bar = tqdm(total=len(todo), desc=desc or f"scoring {model_key[:40]}", unit="input", disable=not progress or not todo)
    for start in range(0, len(todo), batch_size):
        batch_keys = todo[start:start + batch_size]
        batch = scorer.score([unique[k] for k in batch_keys])
        _check_batch(batch, len(batch_keys), model_key)
        results = [CachedScore(_finite_or_none(batch.scores[i]),
                               batch.errors[i] if np.isfinite(batch.scores[i]) else (batch.errors[i] or "non-finite score"),
                               dict(batch.usage[i]) if batch.usage else {},
                               batch.raw[i] if batch.raw else None)
                   for i in range(len(batch_keys))]
        cache.put_many(list(zip(batch_keys, results)))
        found.update(zip(batch_keys, results))
        bar.update(len(batch_keys))
    bar.close()
    elapsed = time.perf_counter() - started

    todo_set = set(todo)
    frame = pd.DataFrame({
        "qid": [r[0] for r in rows],
        "pid": [r[1] for r in rows],
        "score": [np.nan if found[k].score is None else float(found[k].score) for k in keys],
        "error": [found[k].error for k in keys],
        "usage": [found[k].usage for k in keys],
        "raw": [found[k].raw for k in keys],
        "cached": [k not in todo_set for k in keys],
    })
    return ScoredInputs(frame, n_unique=len(unique), n_scored=len(todo), n_cached=len(unique) - len(todo),
                        model_key=model_key, stats={"scoring_seconds": elapsed})


def _check_batch(batch: ScoreBatch, n: int, model_key: str) -> None:
    """A misaligned batch would silently attach scores to the wrong inputs: refuse it."""
    if len(batch.scores) != n or len(batch.errors) != n:
        raise ValueError(f"scorer {model_key!r} returned {len(batch.scores)} scores / {len(batch.errors)} errors "
                         f"for {n} inputs")
    for name, seq in (("usage", batch.usage), ("raw", batch.raw)):
        if seq and len(seq) != n:
            raise ValueError(f"scorer {model_key!r} returned {len(seq)} {name} entries for {n} inputs")
