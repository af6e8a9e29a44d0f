"""The SQLite store of text scores shared by every scorer (``docs/protocol.md#caches``).

One SQLite file in WAL mode: concurrent pytest-xdist workers can read and write it,
an interrupted run keeps every committed chunk, and the tables can be rebuilt from it
alone on a CPU.

Integrity: SQLite's own checks do not notice a flipped byte inside a stored value, so
every row carries an HMAC-SHA256 under the user's key (``fixtures.userkey``) over its key and
every stored field, checked on each read; a row that fails (altered, or written by a process
without the key: a co-user of a shared cache, docs/reproducibility.md#sharing-a-cache) is named
in a warning, deleted and rescored, never used. A file that
SQLite cannot read (truncated, overwritten) is moved aside as
``<name>.corrupt-<UTC timestamp>`` (with its WAL) and a fresh cache takes its place, so
nothing is deleted and the scores are recomputed (a link in its place, which SQLite would follow, holds no
score: it is removed). The schema version is part of the
file name and of ``PRAGMA user_version``; a file of another layout is moved aside the
same way rather than misread. The write-ahead log is truncated back to :data:`WAL_LIMIT_BYTES` after
each checkpoint.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import sqlite3
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import TypeVar

import numpy as np
from filelock import FileLock

from fixtures.artifacts import NotRegularFile, regular
from fixtures.identity import canonical_json
from fixtures.userkey import user_key
from rankers.scorers.results import MAX_REPLY_CHARS, CachedScore, CacheKey, capped, finite_or_none

SCHEMA_VERSION = 3
#: Versioned so that a cache of an older layout (v1: without row digests; v2: plain sha256 row digests, which any
#: writer can recompute) is never opened as this one: its judgments are made again under the user's key.
CACHE_FILE = f"text_scores.v{SCHEMA_VERSION}.sqlite"
T = TypeVar("T")

_COLUMNS = ("model_key", "query_sha", "pid", "passage_sha", "score", "error", "usage", "raw", "created", "digest")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS scores (
    model_key TEXT NOT NULL,
    query_sha TEXT NOT NULL,
    pid TEXT NOT NULL,
    passage_sha TEXT NOT NULL,
    score REAL,
    error TEXT,
    usage TEXT NOT NULL,
    raw TEXT,
    created REAL NOT NULL,
    digest TEXT NOT NULL,
    PRIMARY KEY (model_key, query_sha, pid, passage_sha)
) WITHOUT ROWID
"""
#: The store's generation: an id drawn when the file is made and a count that SQLite's own triggers raise on every
#: change to ``scores`` (by this suite or by any other writer), so ``generation()`` changes whenever a stored
#: judgment may have: what a memo of read judgments is keyed by (docs/protocol.md#caches).
_GENERATION = ("CREATE TABLE IF NOT EXISTS generation (store_id TEXT NOT NULL, changes INTEGER NOT NULL)",
               *(f"CREATE TRIGGER IF NOT EXISTS scores_{event.lower()} AFTER {event} ON scores "
                 "BEGIN UPDATE generation SET changes = changes + 1; END" for event in ("INSERT", "UPDATE", "DELETE")))
#: Size the write-ahead log is truncated back to after a checkpoint (SQLite's ``journal_size_limit``).
WAL_LIMIT_BYTES = 8 << 20
#: The store's file and those SQLite keeps beside it.
_FILES = ("", "-wal", "-shm", "-journal")
#: SQLite primary result codes meaning "these bytes are not a (sound) database".
_CORRUPTION_CODES = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


class ScoreCacheWarning(UserWarning):
    """Stored scores were discarded (failed digest, unreadable or foreign file); they will be rescored."""


def row_digest(mac: hmac.HMAC, key: CacheKey, score: float | None, error: str | None, usage: str, raw: str | None,
               created: float) -> str:
    """HMAC-SHA256 (``mac``: keyed with the user's key, nothing fed yet; copied per row) over a row's key and every
    stored field (``usage`` as its stored JSON text).

    JSON keeps None distinct from "" and writes floats with ``repr``, which round-trips
    SQLite's 8-byte REAL exactly, so a sound row always reproduces its digest. The fields form a list of
    scalars, written as canonical JSON (``fixtures.identity``: sorted keys, ASCII).
    """
    row = mac.copy()
    row.update(canonical_json([*key, score, error, usage, raw, created]).encode("utf-8"))
    return row.hexdigest()


class _Unusable(Exception):
    """The cache file cannot be used as a score cache of this schema (corrupt, truncated or foreign)."""


def _is_corruption(exc: sqlite3.DatabaseError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and (code & 0xFF) in _CORRUPTION_CODES




class ScoreCache:
    """SQLite-backed store of text scores; safe across processes (WAL, busy timeout)."""

    def __init__(self, path: Path, timeout_s: float = 120.0) -> None:
        self.path = Path(path)
        self.timeout_s = timeout_s
        self._mac = hmac.new(user_key(), digestmod=hashlib.sha256)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Opened under the file's lock, one process at a time: an open beside another process's recovery met the
        # files being moved aside ('disk I/O error' on the vanished -shm), and two first opens of one file raced to
        # switch it to WAL, which SQLite answers with SQLITE_BUSY without waiting (its busy handler is not asked).
        with self._lock():
            try:
                self._conn = self._connect()
            except _Unusable as exc:
                self._conn = self._replace(str(exc))

    def _lock(self) -> FileLock:
        """The lock every open and every recovery of the file holds (``<file>.lock`` beside it)."""
        return FileLock(str(self.path.with_name(self.path.name + ".lock")))

    @classmethod
    def in_folder(cls, folder: Path) -> ScoreCache:
        """The shared cache of a run's score folder: ``<folder>/text_scores.v3.sqlite``."""
        return cls(Path(folder) / CACHE_FILE)

    def _connect(self) -> sqlite3.Connection:
        """Open, create or verify the file; ``_Unusable`` when SQLite finds it corrupt or its layout differs, or when
        it or a file SQLite keeps beside it is a link or not a regular file (SQLite would follow a link)."""
        for suffix in _FILES:
            if os.path.lexists(f"{self.path}{suffix}"):
                try:
                    regular(Path(f"{self.path}{suffix}"), "score cache file")
                except NotRegularFile as exc:
                    raise _Unusable(str(exc)) from None
        try:
            # A streaming backend's callbacks may run on the thread that runs its event loop (``run_sync`` inside a
            # notebook's loop) while the owning thread waits for it: one user at a time, so sharing is safe.
            conn = sqlite3.connect(self.path, timeout=self.timeout_s, isolation_level=None, check_same_thread=False)
        except sqlite3.OperationalError as exc:
            raise type(exc)(f"score cache {self.path}: cannot open: {exc}") from exc
        try:
            conn.execute("PRAGMA busy_timeout = %d" % int(self.timeout_s * 1000))
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute(f"PRAGMA journal_size_limit = {WAL_LIMIT_BYTES}")
            conn.execute("PRAGMA temp_store = MEMORY")  # the lookup's temporary key table never touches disk
            conn.execute(_SCHEMA)
            for statement in _GENERATION:
                conn.execute(statement)
            if conn.execute("SELECT count(*) FROM generation").fetchone()[0] != 1:
                with _transaction(conn):  # checked again under the write lock: one process draws the id
                    if conn.execute("SELECT count(*) FROM generation").fetchone()[0] != 1:
                        conn.execute("DELETE FROM generation")
                        conn.execute("INSERT INTO generation VALUES (?, 0)", (uuid.uuid4().hex,))
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            columns = tuple(r[1] for r in conn.execute("PRAGMA table_info(scores)"))
            if columns != _COLUMNS or version not in (0, SCHEMA_VERSION):
                raise _Unusable(f"layout differs from schema v{SCHEMA_VERSION} (user_version {version}, "
                                f"columns {list(columns)})")
            if version == 0:
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            # Reads every page once (tens of ms for a full run's cache): a truncated or torn file is
            # found here, before any work, rather than as a raw DatabaseError mid-run.
            problems = [r[0] for r in conn.execute("PRAGMA quick_check(5)")]
            if problems != ["ok"]:
                raise _Unusable("quick_check: " + "; ".join(problems))
        except sqlite3.DatabaseError as exc:
            conn.close()
            if _is_corruption(exc):
                raise _Unusable(str(exc)) from exc
            raise type(exc)(f"score cache {self.path}: {exc}") from exc
        except _Unusable:
            conn.close()
            raise
        return conn

    def _recover(self, reason: str, recheck: bool) -> sqlite3.Connection:
        """Move an unusable file aside and start a fresh one (one process at a time).

        With ``recheck``, a file that another process has already replaced is simply used.
        """
        with self._lock():
            if recheck:
                try:
                    return self._connect()
                except _Unusable as exc:
                    reason = str(exc)
            return self._replace(reason)

    def _replace(self, reason: str) -> sqlite3.Connection:
        """Move the unusable file (and its -wal, -shm and -journal) aside and open a fresh one; the caller holds the
        lock. A link in its place holds no score of the user's: it is removed, never followed."""
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
        aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        for suffix in _FILES:
            src = Path(f"{self.path}{suffix}")
            if src.is_symlink():
                src.unlink()
            elif src.exists():
                os.replace(src, f"{aside}{suffix}")
        warnings.warn(f"score cache {self.path} is unusable ({reason}); moved it aside to {aside.name} and "
                      "started a fresh cache: its scores will be recomputed", ScoreCacheWarning, stacklevel=4)
        return self._connect()

    def _run(self, op: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``op``; if SQLite reports corruption, recover (move aside, fresh file) and run it again."""
        attempt = 0
        while True:
            try:
                return op(self._conn)
            except sqlite3.DatabaseError as exc:
                if not _is_corruption(exc) or attempt == 2:  # e.g. a full disk: named, what was committed is kept
                    raise type(exc)(f"score cache {self.path}: {exc}") from exc
                self._conn.close()
                # First retry: another process may already have replaced the file under our open handle.
                self._conn = self._recover(str(exc), recheck=attempt == 0)
                attempt += 1

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> ScoreCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def lookup(self, keys: Iterable[CacheKey]) -> tuple[dict[CacheKey, CachedScore], list[CacheKey]]:
        """Verified stored results for ``keys``, and the keys whose row failed its digest.

        Failed rows are named in a ``ScoreCacheWarning`` and deleted, so they read as absent
        and are rescored; they are never returned.
        """
        keys = list(keys)
        if not keys:
            return {}, []
        rows = self._run(lambda conn: _fetch(conn, keys))
        out: dict[CacheKey, CachedScore] = {}
        bad: list[tuple[CacheKey, str]] = []
        loads, digest, mac = json.loads, row_digest, self._mac
        for mk, qs, pid, ps, score, error, usage, raw, created, stored in rows:
            key = (mk, qs, pid, ps)
            if not hmac.compare_digest(digest(mac, key, score, error, usage, raw, created), stored):
                bad.append((key, stored))
                continue
            out[key] = CachedScore(score, error, loads(usage), raw)
        if bad:
            self._reject(bad)
        return out, [k for k, _ in bad]

    def _reject(self, bad: list[tuple[CacheKey, str]]) -> None:
        """Name rows that failed their digest (file, model key, pids) and delete them so they are rescored."""
        by_model: dict[str, list[str]] = {}
        for key, _ in bad:
            by_model.setdefault(key[0], []).append(key[2])
        for model_key, pids in by_model.items():
            shown = ", ".join(repr(p) for p in pids[:10]) + (f" and {len(pids) - 10} more" if len(pids) > 10 else "")
            warnings.warn(f"score cache {self.path}: {len(pids)} stored score(s) of model {model_key!r} fail their "
                          f"digest check (pid {shown}); deleted, they will be rescored", ScoreCacheWarning,
                          stacklevel=3)

        def delete(conn: sqlite3.Connection) -> None:
            # Only the bad version: a sound row written meanwhile by another worker stays.
            with _transaction(conn):
                conn.executemany("DELETE FROM scores WHERE model_key=? AND query_sha=? AND pid=? AND passage_sha=? "
                                 "AND digest=?", [(*k, d) for k, d in bad])
        self._run(delete)

    def generation(self) -> tuple[str, int]:
        """(store id, changes so far): equal at two moments only if no stored judgment changed in between."""
        return self._run(lambda conn: tuple(conn.execute("SELECT store_id, changes FROM generation").fetchone()))

    def holds(self, model_key: str) -> bool:
        """Whether any available judgment of ``model_key`` is stored (one indexed probe): whether a judge whose
        server does not answer may still have every judgment a run needs here."""
        return self._run(lambda conn: conn.execute("SELECT 1 FROM scores WHERE model_key=? AND score IS NOT NULL "
                                                   "LIMIT 1", (model_key,)).fetchone()) is not None

    def history(self, model_key: str, limit: int = 200) -> list[float]:
        """Measured seconds per judgment of the latest ``limit`` stored available judgments of ``model_key``: each
        one's share of its stage's wall-clock (``wall_s``), else its request seconds; what a plan's time estimate
        reads (docs/protocol.md#judging-cost). Rows failing their digest are left out (a lookup deletes them)."""
        rows = self._run(lambda conn: conn.execute(
            _SELECT + " WHERE model_key=? AND score IS NOT NULL ORDER BY created DESC LIMIT ?",
            (model_key, limit)).fetchall())
        out = []
        for mk, qs, pid, ps, score, error, usage, raw, created, stored in rows:
            if row_digest(self._mac, (mk, qs, pid, ps), score, error, usage, raw, created) != stored:
                continue
            u = json.loads(usage)
            value = u.get("wall_s", u.get("latency_s", u.get("seconds")))
            if isinstance(value, (int, float)) and np.isfinite(value):
                out.append(float(value))
        return out

    def put_many(self, rows: Sequence[tuple[CacheKey, CachedScore]],
                 max_reply_chars: int = MAX_REPLY_CHARS) -> list[CachedScore]:
        """Store results in one transaction (all or nothing), replacing older results for the same keys.

        Returns the results as stored: replies and reasons capped at ``max_reply_chars`` (:func:`capped`).
        """
        now = time.time()
        params = []
        stored = []
        for key, r in rows:
            r = capped(r, max_reply_chars)
            stored.append(r)
            score, usage = finite_or_none(r.score), json.dumps(r.usage, sort_keys=True)
            params.append((*key, score, r.error, usage, r.raw, now,
                           row_digest(self._mac, key, score, r.error, usage, r.raw, now)))

        def insert(conn: sqlite3.Connection) -> None:
            with _transaction(conn):
                conn.executemany("INSERT OR REPLACE INTO scores VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", params)
        self._run(insert)
        return stored


@contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """BEGIN IMMEDIATE … COMMIT, rolled back on any error (the connection is in autocommit mode)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM scores"


def _fetch(conn: sqlite3.Connection, keys: list[CacheKey]) -> list[tuple]:
    """Stored rows of ``keys``, read the cheaper of two ways per model key.

    When the wanted keys are at least half of the model's stored rows (a warm run reading its
    windows), one range scan of the model's rows filtered in Python is ~2x faster than a
    join; for a few keys among many, an indexed join on a temporary table reads only those.
    """
    by_model: dict[str, list[CacheKey]] = {}
    for key in keys:
        by_model.setdefault(key[0], []).append(key)
    rows: list[tuple] = []
    for model_key, group in by_model.items():
        stored = conn.execute("SELECT COUNT(*) FROM scores WHERE model_key=?", (model_key,)).fetchone()[0]
        if stored <= 2 * len(group):
            wanted = set(group)
            rows += [r for r in conn.execute(_SELECT + " WHERE model_key=?", (model_key,)) if r[:4] in wanted]
        else:
            rows += _join(conn, group)
    return rows


def _join(conn: sqlite3.Connection, keys: list[CacheKey]) -> list[tuple]:
    cur = conn.cursor()
    cur.execute("CREATE TEMP TABLE IF NOT EXISTS wanted (model_key TEXT, query_sha TEXT, pid TEXT, passage_sha TEXT)")
    cur.execute("DELETE FROM wanted")
    try:
        cur.executemany("INSERT INTO wanted VALUES (?, ?, ?, ?)", keys)
        return cur.execute(f"SELECT {', '.join('s.' + c for c in _COLUMNS)} FROM wanted w "
                           "JOIN scores s USING (model_key, query_sha, pid, passage_sha)").fetchall()
    finally:
        cur.execute("DELETE FROM wanted")
