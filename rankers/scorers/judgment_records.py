"""What a judgment is: the request, its outcome as stored, its cache key and the one judge protocol.

Every judge, pointwise (a grade, a cross-encoder score), listwise or pairwise, answers :class:`Request` s with
:class:`Outcome` s. A pointwise judgment sees one passage, and its key names the judge's ``model_key``, the query
text's sha256, the passage id and the passage text's sha256. A listwise or pairwise judgment's answer depends on
every passage and on the order they were shown in, so its key names the ordered passage ids and the ordered passage
texts' sha256s instead (``docs/protocol.md#caches``, ``#listwise``). The judging loop (``rankers.scorers.judgments``)
and the batch import (``harness.batch_import``) store outcomes through :func:`store_outcomes` and read them back
through :func:`read_stored`, one record for every judge.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from fixtures.identity import ordered_digest, text_digest
from rankers.scorers.base import Batched
from rankers.scorers.results import MAX_REPLY_CHARS, CachedScore, CacheKey, finite_or_none
from rankers.scorers.store import ScoreCache


#: The usage key that holds a reading other than a score; a pointwise scorer's usage may not use it.
RESULT = "result"


@dataclass(frozen=True)
class Request:
    """One judgment to make: the query and the passages in the order the model sees them, as (pid, text)."""

    query: str
    items: tuple[tuple[str, str], ...]

    @property
    def pids(self) -> tuple[str, ...]:
        return tuple(pid for pid, _ in self.items)


class Outcome(NamedTuple):
    """A judgment as stored: ``result`` is the judge's reading, a score (a float, NaN when unavailable) for a
    pointwise judge, a permutation or a choice (None when unusable) for the others."""

    result: Any
    error: str | None
    usage: dict[str, Any]
    raw: str | None
    cached: bool  # read from the cache (made by an earlier run), not judged now

    @property
    def available(self) -> bool:
        """A score is usable when finite (a reason beside it is kept, not read); any other reading when present
        and without error."""
        if isinstance(self.result, float):
            return math.isfinite(self.result)
        return self.error is None and self.result is not None


class Judge(Batched, Protocol):
    """Makes judgments of one or several passages (``model_key`` and ``chunk_size``: ``Batched``); ``sort_key``
    orders the requests still to judge so that consecutive ones share prompt prefixes or lengths."""

    def sort_key(self, request: Request) -> tuple:
        ...

    def judge(self, requests: Sequence[Request], done: Callable[[int, Outcome], None] | None = None) -> list[Outcome]:
        """Outcomes of ``requests``; ``done(i, outcome)`` as each finishes (a judge may omit ``done``: then its
        call's outcomes are committed when it returns)."""
        ...


@dataclass(frozen=True)
class WindowResult:
    """What an algorithm returns for one window: a score per pid (None when it fell back) and its counts."""

    scores: dict[str, float] | None
    error: str | None = None
    order: tuple[str, ...] = ()
    counts: dict[str, float] = field(default_factory=dict)


#: One window's algorithm: yields the requests it needs next, is sent their outcomes, returns its result.
Algorithm = Generator[list[Request], list[Outcome], WindowResult]


def request_key(model_key: str, request: Request, hashes: dict[str, str] | None = None) -> CacheKey:
    """(model key, query sha256, pid, passage sha256) for one passage; for several, (model key, query sha256,
    ``n:`` + digest of the ordered pids, digest of the ordered text sha256s). ``hashes`` memoizes text digests
    across calls (a window repeats its query 20 times)."""
    hashes = {} if hashes is None else hashes

    def h(text: str) -> str:
        digest = hashes.get(text)
        if digest is None:
            digest = hashes[text] = text_digest(text)
        return digest

    if len(request.items) == 1:
        (pid, text), = request.items
        return (model_key, h(request.query), pid, h(text))
    pids = request.pids
    return (model_key, h(request.query), f"{len(pids)}:{ordered_digest(pids)}",
            ordered_digest(h(t) for _, t in request.items))


def _stored(outcome: Outcome) -> CachedScore:
    """An outcome as a score-cache row. A score is the row's score (None when unavailable); any other reading is
    kept in ``usage["result"]`` beside score 1 when usable. An unavailable row (score None) is judged again on
    the next run."""
    if isinstance(outcome.result, float):
        return CachedScore(finite_or_none(outcome.result), outcome.error, outcome.usage, outcome.raw)
    usage = {**outcome.usage, RESULT: outcome.result}
    return CachedScore(1.0 if outcome.available else None, outcome.error if not outcome.available else None,
                       usage, outcome.raw)


def store_outcomes(cache: ScoreCache, keys: Sequence[CacheKey], outcomes: Sequence[Outcome],
                   max_reply_chars: int = MAX_REPLY_CHARS) -> list[Outcome]:
    """Judgments stored under their keys in one transaction: the one way a judgment enters the cache, judged here
    or read from a batch file's results (``harness.batch``). Returns them as stored (replies and reasons capped at
    ``max_reply_chars``), so a run reads what a later warm run will."""
    rows = cache.put_many([(k, _stored(o)) for k, o in zip(keys, outcomes, strict=True)], max_reply_chars)
    return [read_stored(row, cached=False) for row in rows]


def read_stored(row: CachedScore, cached: bool = True) -> Outcome:
    """A stored row as its outcome: a score where the row holds no other reading (``usage["result"]``)."""
    usage = dict(row.usage)
    if RESULT not in usage:
        return Outcome(math.nan if row.score is None else float(row.score),
                       row.error if row.score is not None else (row.error or "unavailable"), usage, row.raw, cached)
    result = usage.pop(RESULT)
    return Outcome(result if row.available else None, None if row.available else (row.error or "unavailable"),
                   usage, row.raw, cached)
