"""The persistent text-score cache shared by every scorer (``docs/protocol.md#caches``).

One SQLite file in WAL mode: concurrent pytest-xdist workers can read and write it,
an interrupted run keeps every committed chunk, and the tables can be rebuilt from it
alone on a CPU. A score is keyed by everything that determines it — the scorer's
``model_key`` (model id, revision, prompt/preprocessing version), the query text's
sha256, the passage id and the passage text's sha256 — so pair-only (L1) and window
(L2) scoring share inputs, and a changed model, prompt or text can never reuse a
stale score.

Integrity: SQLite's own checks do not notice a flipped byte inside a stored value, so
every row carries a sha256 over its key and every stored field, checked on each read;
a row that fails is named in a warning, deleted and rescored, never used. A file that
SQLite cannot read (truncated, overwritten) is moved aside as
``<name>.corrupt-<UTC timestamp>`` (with its WAL) and a fresh cache takes its place, so
nothing is deleted and the scores are recomputed. The schema version is part of the
file name and of ``PRAGMA user_version``; a file of another layout is moved aside the
same way rather than misread.

Size: a stored reply (``raw``) and reason (``error``) are capped at ``max_reply_chars``
characters (:data:`MAX_REPLY_CHARS` unless a declaration says otherwise); a capped row keeps
its score, records the reply's full length in ``usage["reply_chars"]`` and is counted
(``ScoredInputs.n_capped``), so a server that answers megabytes cannot grow the cache by more
than the cap per input. The write-ahead log is truncated back to :data:`WAL_LIMIT_BYTES` after
each checkpoint.

Causes: an unavailable result's stored reason reads as one short cause
(:func:`unavailable_cause`: "HTTP 500 from 127.0.0.1:8011", "ConnectError to ...",
"JSONDecodeError", "unparseable answer", "timeout after 60s", "non-finite score"), so a run can
say why its judgments were unavailable (:func:`unavailable_causes`).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import time
import urllib.parse
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import NamedTuple, TypeVar

import numpy as np
import pandas as pd
from filelock import FileLock

from fixtures.corpus import text_hash
from fixtures.progress import stage
from rankers.scorers.base import ScoreBatch, TextScorer, streams

SCHEMA_VERSION = 2
#: Versioned so that a cache of an older layout (without row digests) is never opened as this one.
CACHE_FILE = f"text_scores.v{SCHEMA_VERSION}.sqlite"
#: Identity of one score: (model_key, query sha256, pid, passage sha256).
CacheKey = tuple[str, str, str, str]
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
#: Characters of a reply or reason stored per input unless a declaration says otherwise (``max_reply_chars``):
#: 64 Ki, ten times a thinking model's 6,144-token output at ~4 characters per token, far above a grade.
MAX_REPLY_CHARS = 65_536
#: Size the write-ahead log is truncated back to after a checkpoint (SQLite's ``journal_size_limit``).
WAL_LIMIT_BYTES = 8 << 20
#: SQLite primary result codes meaning "these bytes are not a (sound) database".
_CORRUPTION_CODES = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


class ScoreCacheWarning(UserWarning):
    """Stored scores were discarded (failed digest, unreadable or foreign file); they will be rescored."""


class CachedScore(NamedTuple):
    """A stored result: ``score`` is None when the input was unavailable, ``error`` then says why.

    A tuple rather than a dataclass: a warm run builds tens of thousands of them per lookup.
    """

    score: float | None
    error: str | None
    usage: dict[str, float]
    raw: str | None

    @property
    def available(self) -> bool:
        return self.score is not None and bool(np.isfinite(self.score))


def row_digest(key: CacheKey, score: float | None, error: str | None, usage: str, raw: str | None,
               created: float) -> str:
    """sha256 over a row's key and every stored field (``usage`` as its stored JSON text).

    JSON keeps None distinct from "" and writes floats with ``repr``, which round-trips
    SQLite's 8-byte REAL exactly, so a sound row always reproduces its digest.
    """
    return hashlib.sha256(json.dumps([*key, score, error, usage, raw, created]).encode()).hexdigest()


class _Unusable(Exception):
    """The cache file cannot be used as a schema-v2 score cache (corrupt, truncated or foreign)."""


def _is_corruption(exc: sqlite3.DatabaseError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and (code & 0xFF) in _CORRUPTION_CODES


class ScoreCache:
    """SQLite-backed store of text scores; safe across processes (WAL, busy timeout)."""

    def __init__(self, path: Path, timeout_s: float = 120.0) -> None:
        self.path = Path(path)
        self.timeout_s = timeout_s
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._conn = self._connect()
        except _Unusable as exc:
            self._conn = self._recover(str(exc), recheck=True)

    @classmethod
    def in_folder(cls, folder: Path) -> ScoreCache:
        """The shared cache of a run's score folder: ``<folder>/text_scores.v2.sqlite``."""
        return cls(Path(folder) / CACHE_FILE)

    def _connect(self) -> sqlite3.Connection:
        """Open, create or verify the file; ``_Unusable`` when SQLite finds it corrupt or its layout differs."""
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
        with FileLock(str(self.path.with_name(self.path.name + ".lock"))):
            if recheck:
                try:
                    return self._connect()
                except _Unusable as exc:
                    reason = str(exc)
            stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
            aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
            for suffix in ("", "-wal", "-shm"):
                src = Path(f"{self.path}{suffix}")
                if src.exists():
                    os.replace(src, f"{aside}{suffix}")
            warnings.warn(f"score cache {self.path} is unusable ({reason}); moved it aside to {aside.name} and "
                          "started a fresh cache: its scores will be recomputed", ScoreCacheWarning, stacklevel=3)
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
        loads, digest = json.loads, row_digest
        for mk, qs, pid, ps, score, error, usage, raw, created, stored in rows:
            key = (mk, qs, pid, ps)
            if digest(key, score, error, usage, raw, created) != stored:
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

    def history(self, model_key: str, limit: int = 200) -> list[float]:
        """Measured seconds per judgment of the latest ``limit`` stored available judgments of ``model_key``: each
        one's share of its stage's wall-clock (``wall_s``), else its request seconds; what a plan's time estimate
        reads (docs/protocol.md#judging-cost). Rows failing their digest are left out (a lookup deletes them)."""
        rows = self._run(lambda conn: conn.execute(
            _SELECT + " WHERE model_key=? AND score IS NOT NULL ORDER BY created DESC LIMIT ?",
            (model_key, limit)).fetchall())
        out = []
        for mk, qs, pid, ps, score, error, usage, raw, created, stored in rows:
            if row_digest((mk, qs, pid, ps), score, error, usage, raw, created) != stored:
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
            score, usage = _finite_or_none(r.score), json.dumps(r.usage, sort_keys=True)
            params.append((*key, score, r.error, usage, r.raw, now, row_digest(key, score, r.error, usage, r.raw, now)))

        def insert(conn: sqlite3.Connection) -> None:
            with _transaction(conn):
                conn.executemany("INSERT OR REPLACE INTO scores VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", params)
        self._run(insert)
        return stored


def _cut(text: str | None, limit: int) -> str | None:
    """``text`` cut to at most ``limit`` characters, the cut marked at its end."""
    if text is None or len(text) <= limit:
        return text
    mark = f"…[cut: {len(text):,} characters]"
    return text[:max(limit - len(mark), 0)] + mark[:limit]


def capped(result: CachedScore, max_reply_chars: int = MAX_REPLY_CHARS) -> CachedScore:
    """``result`` with its reply and reason cut to ``max_reply_chars`` characters each; a cut reply's full
    length goes to ``usage["reply_chars"]`` (how ``n_capped`` counts it). The score is never touched."""
    if isinstance(max_reply_chars, bool) or not isinstance(max_reply_chars, int) or max_reply_chars < 1:
        raise ValueError(f"max_reply_chars must be a positive integer, got {max_reply_chars!r}")
    raw, error = _cut(result.raw, max_reply_chars), _cut(result.error, max_reply_chars)
    if raw is result.raw and error is result.error:
        return result
    usage = dict(result.usage)
    if raw is not result.raw:
        usage["reply_chars"] = float(len(result.raw))
    return CachedScore(result.score, error, usage, raw)


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


def _finite_or_none(score: float | None) -> float | None:
    if score is None:
        return None
    score = float(score)
    return score if np.isfinite(score) else None


@dataclass(frozen=True)
class ScoredInputs:
    """Results aligned with the caller's inputs, plus what this call had to compute.

    ``frame``: one row per input (duplicates kept) with qid, pid, score (NaN when
    unavailable), error, usage (dict), raw, cached (True when read from the cache).
    Counts are over unique inputs: ``n_scored`` sent to the scorer by this call, of which
    ``n_retried`` had a stored unavailable result; ``n_cached`` used as stored;
    ``n_rejected`` stored rows that failed their digest (deleted, hence among ``n_scored``).
    A listwise or pairwise judge's results count judgments instead of inputs and carry ``calls`` and
    ``windows`` (see ``rankers.scorers.judgments``).
    """

    frame: pd.DataFrame
    n_unique: int
    n_scored: int
    n_cached: int
    model_key: str
    n_retried: int = 0
    n_rejected: int = 0
    stats: dict[str, float] = field(default_factory=dict)
    #: For judges that judge several passages at once (``rankers.scorers.judgments``): one row per model
    #: judgment used (its tokens, latency, reading) and one row per judged window; None for pointwise scorers.
    calls: pd.DataFrame | None = None
    windows: pd.DataFrame | None = None

    @property
    def scores(self) -> dict[tuple[str, str], float]:
        """(qid, pid) -> score (NaN when unavailable), the mapping ``window_rerank`` reads."""
        return dict(zip(zip(self.frame["qid"], self.frame["pid"]), self.frame["score"].astype(float)))

    @property
    def judged(self) -> pd.DataFrame:
        """One row per distinct judgment with its ``score`` (NaN when unavailable) and ``error``: the unique inputs
        of a pointwise scorer, the distinct model judgments (lists, comparisons) of a judge with ``calls``, so
        unavailable judgments are counted in judgments, never in the passage rows a failed window spans."""
        if self.calls is None:
            return self.frame.drop_duplicates(["qid", "pid"])
        unique = self.calls.drop_duplicates("key")
        return pd.DataFrame({"qid": unique["qid"].to_numpy(), "pid": unique["key"].to_numpy(),
                             "score": np.where(unique["available"].astype(bool), 1.0, np.nan),
                             "error": unique["error"].to_numpy()})

    @property
    def n_unavailable(self) -> int:
        """Distinct judgments unavailable (``judged``)."""
        return int(self.judged["score"].isna().sum())

    @property
    def n_capped(self) -> int:
        """Unique inputs whose stored reply was cut to the cap."""
        return capped_replies(self.frame)


#: Reasons as the scorers write them, read as short causes by :func:`unavailable_cause` (the first match decides).
_HTTP_STATUS = re.compile(r"\bHTTP (\d{3})\b")
_TIMEOUT = re.compile(r"\btimeout after ([\d.]+ ?s)\b", re.IGNORECASE)
_MALFORMED = re.compile(r"\bmalformed (?:response|reply)\b.*?\b(JSONDecodeError|UnicodeDecodeError)\b")
_EXCEPTION = re.compile(r"\b([A-Z][A-Za-z]*(?:Error|Exception|Timeout|Unavailable|Interrupt))\b")
_URL = re.compile(r"\bhttps?://[^\s)\]'\"]+")
#: Phrases of the scorers' reasons (lower case) and the cause each reads as.
_PHRASES = {"unparseable answer": "unparseable answer", "empty answer": "empty answer",
            "unterminated <think> block": "unterminated <think> block", "no output": "no output",
            "no message content": "no message content", "malformed response": "malformed reply",
            "malformed reply": "malformed reply", "non-finite": "non-finite score",
            "no score for this document": "no score for a document", "no numeric": "no numeric score"}


def unavailable_cause(error: str | None) -> str:
    """A stored reason as a short cause that counts alike across inputs: what failed and, for a server, where.

    E.g. ``ConnectError: [Errno 111] Connection refused (http://127.0.0.1:8011/v1/rerank)`` reads
    "ConnectError to 127.0.0.1:8011"; ``HTTP 500 (...): boom`` reads "HTTP 500 from 127.0.0.1:8011";
    ``parse: unparseable answer '3 because'`` reads "unparseable answer". Unknown reasons keep their
    first words, numbers masked, so they still group.
    """
    if not error or not error.strip():
        return "no reason recorded"
    text = " ".join(error.split())
    url = _URL.search(text)
    host = urllib.parse.urlsplit(url.group(0)).netloc if url else ""
    if (m := _HTTP_STATUS.search(text)) is not None:
        return f"HTTP {m.group(1)}" + (f" from {host}" if host else "")
    if (m := _TIMEOUT.search(text)) is not None:
        return f"timeout after {m.group(1).replace(' ', '')}" + (f" to {host}" if host else "")
    if (m := _MALFORMED.search(text)) is not None:
        return m.group(1) + (f" from {host}" if host else "")
    lowered = text.lower()
    cause = next((c for phrase, c in _PHRASES.items() if phrase in lowered), None)
    if cause is not None:
        return cause + (f" from {host}" if host and cause == "malformed reply" else "")
    if (m := _EXCEPTION.search(text)) is not None:
        if host:  # a connection-level failure: where matters more than the message
            return f"{m.group(1)} to {host}"
        return _masked(text[m.start():])
    return _masked(text)


def _masked(text: str) -> str:
    """The first words of a reason with numbers masked, so reasons that differ only in counts group together."""
    return re.sub(r"\d+", "N", text.split(" (http", 1)[0])[:80]


def unavailable_causes(frame: pd.DataFrame) -> dict[str, int]:
    """Unavailable unique (qid, pid) inputs of a scored frame (``score`` NaN) per cause, most frequent first."""
    unique = frame.drop_duplicates(["qid", "pid"])
    errors = unique.loc[unique["score"].isna(), "error"]
    counts = Counter(unavailable_cause(e if isinstance(e, str) else None) for e in errors)
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def endpoint_summary(usage: Iterable[object], cached: Iterable[bool]) -> dict[str, dict[str, object]]:
    """Per server endpoint (``docs/protocol.md#endpoints``): ``judgments`` it made in this run, ``resent`` requests
    taken from it to another one and ``taken_out`` (why, or None), read from the judgments' stored usage.

    Only judgments made now count (``cached`` False): a warm run names no endpoint it did not contact.
    Endpoints are listed in the order first seen; judgments without an endpoint (in-process runtimes) are ignored.
    """
    out: dict[str, dict[str, object]] = {}

    def entry(url: str) -> dict[str, object]:
        return out.setdefault(url, {"judgments": 0, "resent": 0, "taken_out": None})

    for u, was_cached in zip(usage, cached):
        if was_cached or not isinstance(u, dict):
            continue
        for url, reason in (u.get("resent_from") or {}).items():
            e = entry(str(url))
            e["resent"] = int(e["resent"]) + 1
            e["taken_out"] = e["taken_out"] or str(reason)
        if isinstance(u.get("endpoint"), str):
            e = entry(u["endpoint"])
            e["judgments"] = int(e["judgments"]) + 1
    return out


def capped_replies(frame: pd.DataFrame) -> int:
    """Unique inputs of a scored frame whose stored reply was cut to the cap (``usage["reply_chars"]``)."""
    if "usage" not in frame:
        return 0
    unique = frame.drop_duplicates(["qid", "pid"])
    return int(sum(isinstance(u, dict) and "reply_chars" in u for u in unique["usage"]))


def score_with_cache(scorer: TextScorer, inputs: Sequence[tuple[str, str, str, str]], cache: ScoreCache,
                     batch_size: int = 64, progress: bool = True, *, desc: str | None = None,
                     max_reply_chars: int = MAX_REPLY_CHARS) -> ScoredInputs:
    """Score ``(qid, pid, query_text, passage_text)`` inputs, computing only what the cache lacks.

    Identical inputs (same query text, pid, passage text) are scored once. A stored
    unavailable result is retried (a dead server or a timeout must not stick); its old error
    stays stored until the new result replaces it. The scorer receives (query text, passage
    text) tuples and nothing else; see ``_score_missing`` for how they are ordered and cut.
    Progress goes to a ``fixtures.progress`` stage named ``desc`` (done/total, rate, ETA,
    unavailable so far). Replies and reasons are stored capped at ``max_reply_chars`` (the results
    returned are those stored, so a warm run reads what a cold one returned).
    """
    model_key = scorer.model_key
    started = time.perf_counter()
    rows = [(str(q), str(p), str(qt), str(pt)) for q, p, qt, pt in inputs]
    keys = cache_keys(model_key, rows)
    unique: dict[CacheKey, tuple[str, str]] = {}
    for key, (_, _, qt, pt) in zip(keys, rows):
        unique.setdefault(key, (qt, pt))
    found, rejected = cache.lookup(unique)
    lookup_s = time.perf_counter() - started
    todo = [k for k in unique if k not in found or not found[k].available]
    n_retried = sum(k in found for k in todo)
    scoring_started = time.perf_counter()
    _score_missing(scorer, todo, unique, found, cache, batch_size,
                   desc=(desc or f"score {model_key[:40]}") if progress else None, max_reply_chars=max_reply_chars)
    scoring_s = time.perf_counter() - scoring_started
    return ScoredInputs(_aligned_frame(rows, keys, found, set(todo)), n_unique=len(unique), n_scored=len(todo),
                        n_cached=len(unique) - len(todo), model_key=model_key, n_retried=n_retried,
                        n_rejected=len(rejected),
                        stats={"lookup_seconds": lookup_s, "scoring_seconds": scoring_s,
                               "total_seconds": time.perf_counter() - started})


def cache_keys(model_key: str, rows: list[tuple[str, str, str, str]]) -> list[CacheKey]:
    """The cache key of every input, hashing each distinct text once (a window repeats its query 20 times)."""
    hashes: dict[str, str] = {}

    def digest_of(text: str) -> str:
        h = hashes.get(text)
        if h is None:
            h = hashes[text] = text_hash(text)
        return h

    return [(model_key, digest_of(qt), p, digest_of(pt)) for _, p, qt, pt in rows]


def _score_missing(scorer: TextScorer, todo: list[CacheKey], unique: dict[CacheKey, tuple[str, str]],
                   found: dict[CacheKey, CachedScore], cache: ScoreCache, batch_size: int, desc: str | None,
                   max_reply_chars: int = MAX_REPLY_CHARS) -> None:
    """Score ``todo`` and commit every finished input at once (docs/protocol.md#judging-cost).

    A scorer whose ``score`` takes ``done`` (``rankers.scorers.base.streams``: the LLM grader) hands over each
    input as it finishes and it is committed then, so an interruption loses no finished judgment; any other
    scorer's call is committed when it returns (an interruption loses that call's inputs at most). Each input
    stores its share of the measured wall-clock (``wall_s``: the time since the previous input finished), so a
    stage's wall time is the sum of its inputs' shares, however many requests were in flight.

    The inputs are ordered by ``scorer.sort_key(query, passage)`` when the scorer has one (e.g.
    token length, so a chunk pads little), else kept in input order, and sent in chunks of
    ``scorer.chunk_size`` inputs (``batch_size`` when it has none). With nothing to score the
    scorer is not touched beyond its ``model_key``, so a lazily loaded model never loads.
    """
    if not todo:
        return
    model_key = scorer.model_key
    chunk = getattr(scorer, "chunk_size", batch_size)
    if not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"scorer {model_key!r}: chunk size must be a positive integer, got {chunk!r}")
    sort_key = getattr(scorer, "sort_key", None)
    if sort_key is not None:
        todo.sort(key=lambda k: sort_key(*unique[k]))  # stable: ties keep input order
    streaming = streams(scorer.score)
    with stage(desc, len(todo), "inputs") if desc else nullcontext() as reporter:
        last = time.perf_counter()
        for start in range(0, len(todo), chunk):
            chunk_keys = todo[start:start + chunk]
            stored: dict[int, CachedScore] = {}

            def commit(i: int, batch: ScoreBatch) -> None:
                nonlocal last
                now = time.perf_counter()
                (result,) = store_batch(cache, [chunk_keys[i]], batch, now - last, max_reply_chars)
                last = now
                stored[i] = found[chunk_keys[i]] = result
                if reporter is not None:
                    reporter.update(1, unavailable=int(result.score is None))

            batch = scorer.score([unique[k] for k in chunk_keys], done=commit) if streaming \
                else scorer.score([unique[k] for k in chunk_keys])
            _check_batch(batch, len(chunk_keys), model_key)
            rest = [i for i in range(len(chunk_keys)) if i not in stored]
            if not rest:
                continue
            now = time.perf_counter()
            share = (now - last) / len(rest)
            last = now
            results = store_batch(cache, [chunk_keys[i] for i in rest], _subset(batch, rest), share, max_reply_chars)
            found.update(zip((chunk_keys[i] for i in rest), results))
            if reporter is not None:
                reporter.update(len(rest), unavailable=sum(r.score is None for r in results))


def _subset(batch: ScoreBatch, rows: list[int]) -> ScoreBatch:
    """The rows of a batch, in that order."""
    if rows == list(range(len(batch.scores))):
        return batch
    return ScoreBatch(np.asarray(batch.scores)[rows], [batch.errors[i] for i in rows],
                      [batch.usage[i] for i in rows] if batch.usage else [],
                      [batch.raw[i] for i in rows] if batch.raw else [])


def store_batch(cache: ScoreCache, keys: Sequence[CacheKey], batch: ScoreBatch, seconds: float,
                max_reply_chars: int = MAX_REPLY_CHARS) -> list[CachedScore]:
    """A scorer's batch for ``keys`` checked and stored in one transaction; the results as stored.

    The one way a pointwise judgment enters the cache, scored here or read from a batch file's results
    (``harness.batch``). ``seconds`` is each input's share of the measured wall-clock (stored as ``wall_s``).
    """
    _check_batch(batch, len(keys), keys[0][0] if keys else "?")
    return cache.put_many([(k, _stored_result(batch, i, seconds)) for i, k in enumerate(keys)], max_reply_chars)


def _stored_result(batch: ScoreBatch, i: int, seconds: float) -> CachedScore:
    """Input ``i`` of a batch as stored: a non-finite score is unavailable, with a reason.

    ``wall_s`` is the input's share of the measured wall-clock (docs/protocol.md#judging-cost). A scorer that
    reports no time of its own (no ``seconds`` or ``latency_s`` in its usage) also gets it as ``seconds``, with
    ``seconds_shared = 1``, so cost tables never show real work as free.
    """
    finite = bool(np.isfinite(batch.scores[i]))
    usage = dict(batch.usage[i]) if batch.usage else {}
    if np.isfinite(seconds):  # a batch file's result has no time of its own
        usage.setdefault("wall_s", float(seconds))
    if "seconds" not in usage and "latency_s" not in usage:
        usage.update(seconds=seconds, seconds_shared=1.0)
    return CachedScore(_finite_or_none(batch.scores[i]),
                       batch.errors[i] if finite else (batch.errors[i] or "non-finite score"),
                       usage, batch.raw[i] if batch.raw else None)


def _aligned_frame(rows: list[tuple[str, str, str, str]], keys: list[CacheKey], found: dict[CacheKey, CachedScore],
                   scored_now: set[CacheKey]) -> pd.DataFrame:
    """One row per input, in the caller's order (duplicates kept)."""
    per_key = [found[k] for k in keys]
    return pd.DataFrame({
        "qid": [r[0] for r in rows],
        "pid": [r[1] for r in rows],
        "score": np.array([np.nan if r.score is None else r.score for r in per_key], dtype=np.float64),
        "error": [r.error for r in per_key],
        "usage": [r.usage for r in per_key],
        "raw": [r.raw for r in per_key],
        "cached": [k not in scored_now for k in keys],
    })


def _check_batch(batch: ScoreBatch, n: int, model_key: str) -> None:
    """A misaligned batch would silently attach scores to the wrong inputs: refuse it."""
    if len(batch.scores) != n or len(batch.errors) != n:
        raise ValueError(f"scorer {model_key!r} returned {len(batch.scores)} scores / {len(batch.errors)} errors "
                         f"for {n} inputs")
    for name, seq in (("usage", batch.usage), ("raw", batch.raw)):
        if seq and len(seq) != n:
            raise ValueError(f"scorer {model_key!r} returned {len(seq)} {name} entries for {n} inputs")
