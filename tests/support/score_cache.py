"""Direct looks into a score-cache file for tests: how many rows are stored, which errors, removing some.

The suite itself never counts or deletes stored scores (a changed input gets a new key; a bad row is
rejected by its digest), so these probes live with the tests and read the SQLite file on their own
connection.
"""
from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from contextlib import closing
from pathlib import Path

from fixtures.identity import text_digest as text_hash
from rankers.scorers.cache import CACHE_FILE, CacheKey, ScoreCache


def cache_key(model_key: str, pid: str, query: str, passage: str) -> CacheKey:
    """The key a score of (query text, passage id, passage text) is stored under."""
    return (model_key, text_hash(query), pid, text_hash(passage))


def _connect(cache: ScoreCache) -> closing[sqlite3.Connection]:
    return closing(sqlite3.connect(cache.path, timeout=cache.timeout_s, isolation_level=None))


def stored_count(cache: ScoreCache, model_key: str | None = None) -> int:
    """Rows stored in the cache's file, for one model key or all."""
    with _connect(cache) as conn:
        if model_key is None:
            return conn.execute("SELECT COUNT(*) FROM scores").fetchone()[0]
        return conn.execute("SELECT COUNT(*) FROM scores WHERE model_key=?", (model_key,)).fetchone()[0]


def rows_in_live_cache(cache_dir: Path, available_only: bool = False) -> int:
    """Rows in a running process's score cache under ``cache_dir``, read-only (0 while the file or its table is
    still being created); ``available_only``: rows with a score, not an unavailable judgment."""
    path = Path(cache_dir) / "scores" / CACHE_FILE
    if not path.is_file():
        return 0
    query = "SELECT COUNT(*) FROM scores" + (" WHERE score IS NOT NULL" if available_only else "")
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1)) as conn:
            return conn.execute(query).fetchone()[0]
    except sqlite3.OperationalError:  # the table is being created
        return 0


def stored_errors(cache: ScoreCache, keys: Iterable[CacheKey]) -> list[str | None]:
    """The stored error of each key, in order (None: stored without error, or not stored)."""
    with _connect(cache) as conn:
        return [(conn.execute("SELECT error FROM scores WHERE model_key=? AND query_sha=? AND pid=? AND "
                              "passage_sha=?", key).fetchone() or (None,))[0] for key in keys]


def delete_stored(cache: ScoreCache, keys: Iterable[CacheKey]) -> int:
    """Remove stored rows (to test partial rescoring); returns how many went."""
    with _connect(cache) as conn:  # rowcount: the rows deleted, not the store's generation count its trigger moves
        return conn.executemany("DELETE FROM scores WHERE model_key=? AND query_sha=? AND pid=? AND passage_sha=?",
                                list(keys)).rowcount
