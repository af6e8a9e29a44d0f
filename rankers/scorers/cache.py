"""The persistent text-score cache shared by every scorer (``docs/protocol.md#caches``): what the cache lacks is
scored, in chunks, each finished input committed at once.

A score is keyed by everything that determines it — the scorer's ``model_key`` (model id, revision,
prompt/preprocessing version), the query text's sha256, the passage id and the passage text's sha256 — so
pair-only (L1) and window (L2) scoring share inputs, and a changed model, prompt or text can never reuse a
stale score.

The parts: the SQLite store with its row digests and recovery (``rankers.scorers.store``), the stored record,
its reply cap and a call's results (``rankers.scorers.results``), and the causes of unavailable judgments
(``rankers.scorers.causes``). This module is their public face: what callers of the score cache import is
listed in ``__all__``.
"""
from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from contextlib import nullcontext

import numpy as np
import pandas as pd

from fixtures.identity import text_digest
from fixtures.progress import stage
from rankers.scorers.base import ScoreBatch, TextScorer, streams
from rankers.scorers.causes import unavailable_cause, unavailable_causes
from rankers.scorers.results import (MAX_REPLY_CHARS, CachedScore, CacheKey, ScoredInputs, capped, capped_replies,
                                     endpoint_summary, finite_or_none)
from rankers.scorers.store import CACHE_FILE, SCHEMA_VERSION, ScoreCache, ScoreCacheWarning

__all__ = ["CACHE_FILE", "MAX_REPLY_CHARS", "SCHEMA_VERSION", "CacheKey", "CachedScore", "ScoreCache",
           "ScoreCacheWarning", "ScoredInputs", "cache_keys", "capped", "capped_replies", "endpoint_summary",
           "score_with_cache", "store_batch", "unavailable_cause", "unavailable_causes", "unique_inputs"]


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
    rows, keys, unique = unique_inputs(model_key, inputs)
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


def unique_inputs(model_key: str, inputs: Iterable[tuple[str, str, str, str]]
                  ) -> tuple[list[tuple[str, str, str, str]], list[CacheKey], dict[CacheKey, tuple[str, str]]]:
    """``(qid, pid, query, passage)`` inputs as strings, the cache key of each, and each distinct key's (query,
    passage) in first-seen order: what is looked up, judged and stored once."""
    rows = [(str(q), str(p), str(qt), str(pt)) for q, p, qt, pt in inputs]
    keys = cache_keys(model_key, rows)
    unique: dict[CacheKey, tuple[str, str]] = {}
    for key, (_, _, qt, pt) in zip(keys, rows):
        unique.setdefault(key, (qt, pt))
    return rows, keys, unique


def cache_keys(model_key: str, rows: list[tuple[str, str, str, str]]) -> list[CacheKey]:
    """The cache key of every input, hashing each distinct text once (a window repeats its query 20 times)."""
    hashes: dict[str, str] = {}

    def digest_of(text: str) -> str:
        h = hashes.get(text)
        if h is None:
            h = hashes[text] = text_digest(text)
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
    if not finite and batch.errors[i] is None:
        usage["cause"] = "non-finite score"
    if np.isfinite(seconds):  # a batch file's result has no time of its own
        usage.setdefault("wall_s", float(seconds))
    if "seconds" not in usage and "latency_s" not in usage:
        usage.update(seconds=seconds, seconds_shared=1.0)
    return CachedScore(finite_or_none(batch.scores[i]),
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
