"""Pointwise judgments: a text scorer as a judge of one passage, and a run's inputs scored through the judging loop.

A pointwise scorer (``rankers.scorers.base.TextScorer``: the cross-encoder, the LLM grader, a researcher's own)
sees (query text, passage text) and nothing else (``docs/protocol.md#window-rule``). :class:`PointwiseJudge` makes
it a ``Judge`` of one-passage requests whose outcome is the score, so its judgments are keyed, stored, read back,
retried, timed and committed as every other judge's (``rankers.scorers.judgment_records``,
``rankers.scorers.judgments``). :func:`score_with_cache` scores ``(qid, pid, query, passage)`` inputs, computing only
what the cache lacks; identical inputs (same query text, pid and passage text) are judged once, so pair-only (L1)
and window (L2) scoring share them (``docs/protocol.md#caches``).
"""
from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext

import numpy as np
import pandas as pd

from fixtures.progress import stage
from rankers.scorers.base import ScoreBatch, TextScorer, streams
from rankers.scorers.judgment_records import RESULT, Outcome, Request, request_key
from rankers.scorers.judgments import WallClock, held, judge_missing
from rankers.scorers.results import MAX_REPLY_CHARS, CacheKey, ScoredInputs
from rankers.scorers.store import ScoreCache


class PointwiseJudge:
    """A ``TextScorer`` as a ``Judge``: each request holds one passage, its outcome's result is the score.

    Nothing but ``model_key`` is read from the scorer until there is something to judge, so a lazily loaded model
    (``rankers.kinds.base.LazyScorer``) never loads on a warm run. The scorer's ``chunk_size`` and ``sort_key``
    (e.g. token length, so a chunk pads little) are used where it has them; else ``chunk_size`` inputs per call, in
    input order.
    """

    def __init__(self, scorer: TextScorer, chunk_size: int = 64) -> None:
        self.scorer = scorer
        self.model_key = scorer.model_key
        self._chunk_size = chunk_size

    @property
    def chunk_size(self) -> int:
        return getattr(self.scorer, "chunk_size", self._chunk_size)

    @functools.cached_property
    def _scorer_sort_key(self) -> Callable[[str, str], object] | None:
        """Read from the scorer once: a lazily loaded scorer checks its key on every attribute read."""
        return getattr(self.scorer, "sort_key", None)

    def sort_key(self, request: Request) -> object:
        key = self._scorer_sort_key
        return () if key is None else key(request.query, request.items[0][1])

    def judge(self, requests: Sequence[Request], done: Callable[[int, Outcome], None] | None = None) -> list[Outcome]:
        inputs = [(r.query, r.items[0][1]) for r in requests]
        if done is not None and streams(self.scorer.score):
            batch = self.scorer.score(inputs, done=lambda i, one: done(i, score_outcomes(one, 1, self.model_key)[0]))
        else:
            batch = self.scorer.score(inputs)
        return score_outcomes(batch, len(inputs), self.model_key)


def score_outcomes(batch: ScoreBatch, n: int, model_key: str) -> list[Outcome]:
    """A scorer's batch of ``n`` scores as outcomes: the score is the result; a non-finite one is NaN and
    unavailable, with a reason (the scorer's, else ``non-finite score``, also stored as its cause). Also the reading
    of a batch file's grades (``harness.batch_import``)."""
    if len(batch.scores) != n or len(batch.errors) != n:  # misaligned, it would attach scores to the wrong inputs
        raise ValueError(f"scorer {model_key!r} returned {len(batch.scores)} scores / {len(batch.errors)} errors "
                         f"for {n} inputs")
    for name, seq in (("usage", batch.usage), ("raw", batch.raw)):
        if seq and len(seq) != n:
            raise ValueError(f"scorer {model_key!r} returned {len(seq)} {name} entries for {n} inputs")
    out = []
    for i in range(n):
        score, error = float(batch.scores[i]), batch.errors[i]
        usage = dict(batch.usage[i]) if batch.usage else {}
        if RESULT in usage:
            raise ValueError(f"scorer {model_key!r}: its usage may not hold the key {RESULT!r} (where a judgment "
                             "that is not a score keeps its reading)")
        if not math.isfinite(score):
            if error is None:
                usage["cause"] = "non-finite score"
            score, error = math.nan, error or "non-finite score"
        out.append(Outcome(score, error, usage, batch.raw[i] if batch.raw else None, False))
    return out


def point_requests(model_key: str, inputs: Iterable[tuple[str, str, str, str]]
                   ) -> tuple[list[tuple[str, str, str, str]], list[CacheKey], dict[CacheKey, Request]]:
    """``(qid, pid, query, passage)`` inputs as strings, the cache key of each, and each distinct key's one-passage
    request in first-seen order: what is looked up, judged and stored once."""
    rows = [(str(q), str(p), str(qt), str(pt)) for q, p, qt, pt in inputs]
    hashes: dict[str, str] = {}
    keys, unique = [], {}
    for _, pid, query, passage in rows:
        request = Request(query, ((pid, passage),))
        key = request_key(model_key, request, hashes)
        keys.append(key)
        unique.setdefault(key, request)
    return rows, keys, unique


def score_with_cache(scorer: TextScorer, inputs: Sequence[tuple[str, str, str, str]], cache: ScoreCache,
                     batch_size: int = 64, progress: bool = True, *, desc: str | None = None,
                     max_reply_chars: int = MAX_REPLY_CHARS) -> ScoredInputs:
    """Score ``(qid, pid, query_text, passage_text)`` inputs, judging only what the cache lacks.

    A stored unavailable result is judged again (a dead server or a timeout must not stick); its old error stays
    stored until the new result replaces it. Progress goes to a ``fixtures.progress`` stage named ``desc``
    (done/total, rate, ETA, unavailable so far). Replies and reasons are stored capped at ``max_reply_chars`` (the
    results returned are those stored, so a warm run reads what a cold one returned).
    """
    started = time.perf_counter()
    judge = PointwiseJudge(scorer, batch_size)
    rows, keys, unique = point_requests(judge.model_key, inputs)
    known = held(cache, unique)
    outcomes = dict(known.outcomes)
    name = (desc or f"score {judge.model_key[:40]}") if progress and known.todo else None
    with stage(name, len(known.todo), "inputs") if name else nullcontext() as reporter:
        outcomes.update(judge_missing(judge, cache, known.todo, unique, WallClock(), reporter, max_reply_chars))
    per_key = [outcomes[k] for k in keys]
    now = set(known.todo)
    frame = pd.DataFrame({
        "qid": [r[0] for r in rows],
        "pid": [r[1] for r in rows],
        "score": np.array([o.result for o in per_key], dtype=np.float64),
        "error": [o.error for o in per_key],
        "usage": [o.usage for o in per_key],
        "raw": [o.raw for o in per_key],
        "cached": [k not in now for k in keys],
    })
    return ScoredInputs(frame, n_unique=len(unique), n_scored=len(now), n_cached=len(unique) - len(now),
                        model_key=judge.model_key, n_retried=known.n_retried, n_rejected=known.n_rejected,
                        stats={"total_seconds": time.perf_counter() - started})
