"""What a judgment of several passages is: the request, its outcome as stored, its cache key and the judge protocol.

A listwise or pairwise judgment's answer depends on every passage and on the order they were shown in, so its key
names the judge's ``model_key``, the query text's sha256, the ordered passage ids and the ordered passage texts'
sha256s (``docs/protocol.md#listwise``). The driver that makes judgments (``rankers.scorers.judgments``) and the
batch import (``harness.batch_import``) store them through :func:`store_outcomes` and read them back alike.
"""
from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from fixtures.identity import text_digest
from rankers.scorers.base import Batched
from rankers.scorers.cache import CachedScore, CacheKey, ScoreCache


@dataclass(frozen=True)
class Request:
    """One judgment to make: the query and the passages in the order the model sees them, as (pid, text)."""

    query: str
    items: tuple[tuple[str, str], ...]

    @property
    def pids(self) -> tuple[str, ...]:
        return tuple(pid for pid, _ in self.items)


class Outcome(NamedTuple):
    """A judgment as stored: ``result`` is the judge's reading (a permutation, a choice), None when unusable."""

    result: Any
    error: str | None
    usage: dict[str, Any]
    raw: str | None
    cached: bool  # read from the cache (made by an earlier run), not judged now

    @property
    def available(self) -> bool:
        return self.error is None and self.result is not None


class Judge(Batched, Protocol):
    """Makes judgments of several passages at once (``model_key`` and ``chunk_size``: ``Batched``)."""

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


def ordered_digest(parts: Iterable[str]) -> str:
    """The digest of ordered parts joined by the unit separator (never inside a pid or a hex digest)."""
    return text_digest("\x1f".join(parts))


def request_key(model_key: str, request: Request, hashes: dict[str, str] | None = None) -> CacheKey:
    """(model key, query sha256, ``n:`` + digest of the ordered pids, digest of the ordered text sha256s)."""
    hashes = {} if hashes is None else hashes

    def h(text: str) -> str:
        if text not in hashes:
            hashes[text] = text_digest(text)
        return hashes[text]

    pids = request.pids
    return (model_key, h(request.query), f"{len(pids)}:{ordered_digest(pids)}", ordered_digest(h(t) for _, t in request.items))


def _stored(outcome: Outcome) -> CachedScore:
    """An outcome as a score-cache row: score 1 when usable (None otherwise, so the next run judges it again)."""
    usage = {**outcome.usage, "result": outcome.result}
    return CachedScore(1.0 if outcome.available else None, outcome.error if not outcome.available else None,
                       usage, outcome.raw)


def store_outcomes(cache: ScoreCache, keys: Sequence[CacheKey], outcomes: Sequence[Outcome]) -> None:
    """Judgments stored under their keys in one transaction: the one way a judgment enters the cache, judged here
    or read from a batch file's results (``harness.batch``)."""
    cache.put_many([(k, _stored(o)) for k, o in zip(keys, outcomes, strict=True)])


def read_stored(row: CachedScore) -> Outcome:
    usage = dict(row.usage)
    result = usage.pop("result", None)
    return Outcome(result if row.available else None, None if row.available else (row.error or "unavailable"),
                   usage, row.raw, True)
