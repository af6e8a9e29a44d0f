"""Judging what the cache lacks: the one judging loop of every judge, and the driver of windows' algorithms.

:func:`judge_missing` is how any judge's missing judgments are made: pointwise scores (through
``rankers.scorers.pointwise``), listwise lists and pairwise comparisons alike are ordered, cut into chunks,
committed as each finishes and timed by one loop. A listwise or pairwise judgment's answer depends on every passage
and on the order they were shown in (``docs/protocol.md#listwise``, ``#pairwise``), so its key names the ordered
passage ids and texts (the records and keys: ``rankers.scorers.judgment_records``). Judgments live in the shared
score cache's table (``rankers.scorers.cache``: row digests, corruption recovery, WAL); an unusable judgment (error,
timeout, a reply with no usable answer) is stored with its reason and judged again on the next run.

A ranking algorithm (RankGPT's sliding windows, PRP's all pairs or bubble passes) is a generator per window:
it yields the judgments it needs next, receives their outcomes, and returns the window's scores. The driver
(:func:`drive`) runs every window's algorithm in lockstep, so each step's judgments of all windows go to the
model together (a batch for a server, prompts sorted to share prefixes for llama.cpp), reads what the cache
holds, commits every judgment as it finishes (a judge whose ``judge`` takes ``done``; otherwise when its call
returns), and reuses a judgment every time it recurs within the run (the same comparison in two bubble passes,
in a window and in its designated pair). The finished unit is one judgment (one list, one ordered comparison): a
window's next round is cut from judgments already committed, so an interrupted window resumes from its last
committed round (docs/protocol.md#judging-cost).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fixtures.identity import ordered_digest
from fixtures.progress import Stage, stage
from rankers.scorers.base import streams
from rankers.scorers.judgment_records import (Algorithm, Judge, Outcome, Request, WindowResult,
                                              read_stored, request_key, store_outcomes)
from rankers.scorers.results import MAX_REPLY_CHARS, CacheKey, ScoredInputs
from rankers.scorers.store import ScoreCache


def plan_requests(model_key: str, cache: ScoreCache, algorithms: Mapping[tuple[str, str], Algorithm],
                  placeholder: Callable[[Request], Any]) -> tuple[int, dict[CacheKey, Request], dict[CacheKey, Request]]:
    """What judging ``algorithms`` would take, before any judgment: (distinct judgments read from the cache, every
    distinct judgment still to make, those of them that are some window's next step: what a batch export writes,
    one round at a time, ``harness.batch``).

    Each algorithm is advanced through the cache; where a judgment is missing, ``placeholder(request)`` (a neutral
    answer: the input order, the first passage) stands in for it, so the later rounds it would cut are counted too.
    The count is exact where the number of judgments does not depend on the answers (RankGPT's sliding windows, all
    pairs, designated pairs) and an estimate for bubble passes, whose recurring comparisons depend on them.
    """
    hashes: dict[str, str] = {}
    cached: dict[CacheKey, Outcome] = {}
    todo: dict[CacheKey, Request] = {}
    pending: dict[CacheKey, Request] = {}
    for algorithm in algorithms.values():
        first = True
        try:
            requests = next(algorithm)
            while True:
                keys = [request_key(model_key, r, hashes) for r in requests]
                found, _ = cache.lookup([k for k in keys if k not in todo and k not in cached])
                cached.update((k, read_stored(row)) for k, row in found.items() if row.available)
                outcomes = []
                for key, request in zip(keys, requests):
                    if key in cached:
                        outcomes.append(cached[key])
                        continue
                    todo.setdefault(key, request)
                    if first:
                        pending.setdefault(key, request)
                    outcomes.append(Outcome(placeholder(request), None, {}, None, False))
                first = first and all(k in cached for k in keys)
                requests = algorithm.send(outcomes)
        except StopIteration:
            continue
    return len(cached), todo, pending


def judge_now(judge: Judge, cache: ScoreCache, requests: Mapping[CacheKey, Request]) -> None:
    """Judge ``requests`` and commit them, each with its share of the call's wall-clock (``wall_s``): the few timed
    calls a plan makes when the cache holds no history of the judge (docs/protocol.md#judging-cost)."""
    keys = list(requests)
    started = time.perf_counter()
    outcomes = judge.judge([requests[k] for k in keys])
    share = (time.perf_counter() - started) / max(len(keys), 1)
    store_outcomes(cache, keys, [o._replace(usage={"wall_s": share, **o.usage}) for o in outcomes])


@dataclass(frozen=True)
class Held:
    """What the cache holds for some keys: their usable judgments, the keys still to judge (in the order given), how
    many of those hold an unusable stored judgment (judged again), and how many stored rows failed their digest."""

    outcomes: dict[CacheKey, Outcome]
    todo: list[CacheKey]
    n_retried: int
    n_rejected: int


def held(cache: ScoreCache, keys: Iterable[CacheKey]) -> Held:
    """The cache's usable judgments of ``keys`` and what is left to judge: the one reading of every judging stage."""
    keys = list(dict.fromkeys(keys))
    found, rejected = cache.lookup(keys)
    outcomes: dict[CacheKey, Outcome] = {}
    todo: list[CacheKey] = []
    n_retried = 0
    for key in keys:
        row = found.get(key)
        if row is not None and row.available:
            outcomes[key] = read_stored(row)
        else:
            todo.append(key)
            n_retried += row is not None
    return Held(outcomes, todo, n_retried, len(rejected))


class WallClock:
    """Shares measured wall-clock among judgments as they finish: each gets its part of the time since the previous
    commit (``wall_s``), so a stage's wall time is the sum of its judgments' shares, however many requests were in
    flight (docs/protocol.md#judging-cost)."""

    def __init__(self) -> None:
        self.last = time.perf_counter()

    def share(self, n: int) -> float:
        now = time.perf_counter()
        share, self.last = (now - self.last) / max(n, 1), now
        return share


def timed(outcome: Outcome, share: float) -> Outcome:
    """``outcome`` made now, with its share of the wall-clock; a judge that reports no time of its own (no
    ``seconds`` or ``latency_s``) gets it as ``seconds`` too, with ``seconds_shared = 1``, so cost tables never
    show real work as free."""
    usage = dict(outcome.usage)
    usage.setdefault("wall_s", share)
    if "seconds" not in usage and "latency_s" not in usage:
        usage.update(seconds=share, seconds_shared=1.0)
    return outcome._replace(usage=usage, cached=False)


def judge_missing(judge: Judge, cache: ScoreCache, todo: list[CacheKey], requests: Mapping[CacheKey, Request],
                  clock: WallClock, reporter: Stage | None = None,
                  max_reply_chars: int = MAX_REPLY_CHARS) -> dict[CacheKey, Outcome]:
    """Judge ``todo`` and commit every finished judgment at once; the judgments as stored.

    The one judging loop of every judge (docs/protocol.md#judging-cost). The requests are ordered by
    ``judge.sort_key`` (stable: ties keep their order) so consecutive prompts share prefixes or lengths, and sent in
    chunks of ``judge.chunk_size``. A judge whose ``judge`` takes ``done`` hands over each judgment as it finishes
    and it is committed then, so an interruption loses no finished judgment; any other judge's call is committed
    when it returns. With nothing to judge the judge is not touched (a lazily loaded model never loads).
    """
    judged: dict[CacheKey, Outcome] = {}
    if not todo:
        return judged
    size = judge.chunk_size
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"judge {judge.model_key!r}: chunk size must be a positive integer, got {size!r}")
    order = sorted(todo, key=lambda k: judge.sort_key(requests[k]))
    streaming = streams(judge.judge)
    for start in range(0, len(order), size):
        chunk = order[start:start + size]

        def commit(indexes: list[int], outcomes: Sequence[Outcome]) -> None:
            share = clock.share(len(indexes))
            keys = [chunk[i] for i in indexes]
            stored = store_outcomes(cache, keys, [timed(o, share) for o in outcomes], max_reply_chars)
            judged.update(zip(keys, stored))
            if reporter is not None:
                if reporter.total is not None and reporter.done + len(keys) > reporter.total:
                    reporter.total = reporter.done + len(keys)  # a sliding judge's plan is an estimate
                reporter.update(len(keys), unavailable=sum(not o.available for o in stored))

        batch = [requests[k] for k in chunk]
        fresh = judge.judge(batch, done=lambda i, o: commit([i], [o])) if streaming else judge.judge(batch)
        if len(fresh) != len(chunk):
            raise RuntimeError(f"judge {judge.model_key!r} returned {len(fresh)} outcomes for {len(chunk)} requests")
        rest = [i for i, k in enumerate(chunk) if k not in judged]
        if rest:
            commit(rest, [fresh[i] for i in rest])
    return judged


@dataclass(frozen=True)
class Driven:
    """Every window's result, each judgment use (``calls``) and the driver's counts."""

    results: dict[tuple[str, str], WindowResult]
    calls: pd.DataFrame
    n_unique: int
    n_judged: int
    n_retried: int
    n_rejected: int
    seconds: float


CALL_COLUMNS = ("qid", "variant", "key", "pids", "cached", "available", "error", "input_tokens", "output_tokens",
                "latency_s", "result", "usage")


def drive(judge: Judge, cache: ScoreCache, algorithms: Mapping[tuple[str, str], Algorithm],
          desc: str | None = None, planned: int | None = None) -> Driven:
    """Run every window's algorithm (keyed by (qid, variant)), judging only what the cache lacks.

    A stored unusable judgment is judged again (once per run); a judgment made in this run is never repeated,
    however often the algorithms ask for it. ``planned`` (the judgments the plan expects to make, ``plan``) is the
    progress stage's total, so its heartbeat says done/total while a slow call is in flight. Each judgment stores
    its share of the measured wall-clock (``wall_s``: the time since the previous one finished).
    """
    started = time.perf_counter()
    model_key = judge.model_key
    hashes: dict[str, str] = {}
    memo: dict[CacheKey, Outcome] = {}
    pending: dict[tuple[str, str], list[Request]] = {}
    results: dict[tuple[str, str], WindowResult] = {}
    running = dict(algorithms)
    rows: list[dict[str, Any]] = []
    n_judged = n_retried = n_rejected = 0

    def advance(name: tuple[str, str], sent: list[Outcome] | None) -> None:
        try:
            pending[name] = running[name].send(sent) if sent is not None else next(running[name])
        except StopIteration as stop:
            results[name] = stop.value
            pending.pop(name, None)

    for name in list(running):
        advance(name, None)
    clock = WallClock()
    with stage(desc, planned, "judgments", announce_after_s=3.0) if desc else nullcontext() as reporter:
        while pending:
            keyed = {name: [request_key(model_key, r, hashes) for r in requests] for name, requests in pending.items()}
            wanted: dict[CacheKey, Request] = {}
            for name, keys in keyed.items():
                for key, request in zip(keys, pending[name]):
                    if key not in memo:
                        wanted.setdefault(key, request)
            known = held(cache, wanted)
            n_rejected += known.n_rejected
            n_retried += known.n_retried
            memo.update(known.outcomes)
            judged = judge_missing(judge, cache, known.todo, wanted, clock, reporter)
            memo.update(judged)
            n_judged += len(judged)
            for name in list(pending):
                outcomes = [memo[k] for k in keyed[name]]
                for key, request, o in zip(keyed[name], pending[name], outcomes):
                    rows.append({"qid": name[0], "variant": name[1], "key": ordered_digest(key)[:32],
                                 "pids": request.pids, "cached": o.cached, "available": o.available,
                                 "error": o.error, "input_tokens": _number(o.usage.get("input_tokens")),
                                 "output_tokens": _number(o.usage.get("output_tokens")),
                                 "latency_s": _number(o.usage.get("latency_s")), "result": o.result, "usage": o.usage})
                advance(name, outcomes)
    calls = pd.DataFrame(rows, columns=list(CALL_COLUMNS))
    return Driven(results, calls, n_unique=int(calls["key"].nunique()) if len(calls) else 0, n_judged=n_judged,
                  n_retried=n_retried, n_rejected=n_rejected, seconds=time.perf_counter() - started)


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


WINDOW_COLUMNS = ("qid", "variant", "fallback", "error", "order", "calls")


def scored_inputs(inputs: Sequence[tuple[str, str, str, str]], driven: Driven, model_key: str) -> ScoredInputs:
    """The window rule's view: one row per input (its window's score for it, NaN where the window fell back),
    with every judgment use (``calls``) and every window's result (``windows``) alongside."""
    main = {qid: r for (qid, variant), r in driven.results.items() if variant == "main"}
    scores, errors = [], []
    for qid, pid, _, _ in inputs:
        result = main.get(str(qid))
        value = np.nan if result is None or result.scores is None else result.scores.get(str(pid), np.nan)
        scores.append(value)
        errors.append(None if np.isfinite(value) else (result.error if result is not None and result.error
                                                        else "no judgment for this passage"))
    used = driven.calls.groupby(["qid", "variant"]).size() if len(driven.calls) else pd.Series(dtype=int)
    windows = pd.DataFrame([{"qid": qid, "variant": variant, "fallback": r.scores is None, "error": r.error,
                             "order": r.order, "calls": int(used.get((qid, variant), 0)), **r.counts}
                            for (qid, variant), r in sorted(driven.results.items())])
    if windows.empty:
        windows = pd.DataFrame(columns=list(WINDOW_COLUMNS))
    cached = {qid: bool(len(g)) and bool(g["cached"].all()) for qid, g in driven.calls.groupby("qid")} \
        if len(driven.calls) else {}
    frame = pd.DataFrame({"qid": [str(i[0]) for i in inputs], "pid": [str(i[1]) for i in inputs],
                          "score": np.asarray(scores, dtype=float), "error": errors,
                          "usage": [{} for _ in inputs], "raw": [None] * len(inputs),
                          "cached": [cached.get(str(i[0]), True) for i in inputs]})
    return ScoredInputs(frame, n_unique=driven.n_unique, n_scored=driven.n_judged,
                        n_cached=driven.n_unique - driven.n_judged, model_key=model_key, n_retried=driven.n_retried,
                        n_rejected=driven.n_rejected, stats={"total_seconds": driven.seconds},
                        calls=driven.calls, windows=windows)


def group_windows(inputs: Sequence[tuple[str, str, str, str]],
                  rank: Callable[[str, str], float]) -> dict[str, tuple[str, tuple[tuple[str, str], ...]]]:
    """The inputs as one window per qid: (query, ((pid, passage), ...)) in the order ``rank(qid, pid)`` gives
    (the reference's ranks: the order the model is shown, whatever order the caller listed them in)."""
    out: dict[str, tuple[str, list[tuple[float, str, str]]]] = {}
    for qid, pid, query, passage in inputs:
        qid, pid = str(qid), str(pid)
        entry = out.setdefault(qid, (str(query), []))
        if entry[0] != query:
            raise ValueError(f"qid {qid!r} comes with two query texts")
        if all(p != pid for _, p, _ in entry[1]):
            entry[1].append((rank(qid, pid), pid, str(passage)))
    return {qid: (query, tuple((pid, text) for _, pid, text in sorted(items))) for qid, (query, items) in out.items()}
