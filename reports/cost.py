"""Cost accounting and cached-score replays (``docs/protocol.md#measures``, paper §V-C).

Everything here reads the score cache only: the K=3 window and the two
conditional-reranking rules are replays that never call a model, so they cost nothing
to recompute and cannot drift from the scores that produced Table II.
"""
from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from rankers.base import Ranking
from rankers.window import window_rerank

#: Rule A skips reranking when fusion's top passage leads the runner-up by at least this much
#: on the [0, 1] fused scale (a confident fusion winner).
MARGIN_SKIP = 0.25


def _usage_sum(usage: pd.Series, key: str) -> tuple[float, int]:
    values = np.array([u.get(key, np.nan) if isinstance(u, dict) else np.nan for u in usage], dtype=float)
    return float(np.nansum(values)), int(np.isnan(values).sum())


def _wall(usage: Iterable[object]) -> float:
    """The measured wall-clock of the judgments: the sum of their stored shares (``wall_s``, the time since the
    previous judgment finished; docs/protocol.md#judging-cost). A judgment stored before shares were recorded
    counts its own seconds (``latency_s`` or ``seconds``)."""
    total = 0.0
    for u in usage:
        if not isinstance(u, dict):
            continue
        value = u.get("wall_s", u.get("latency_s", u.get("seconds", np.nan)))
        value = float(value) if isinstance(value, (int, float)) else np.nan
        total += value if np.isfinite(value) else 0.0
    return total


def stage_cost(stage: str, frame: pd.DataFrame, calls: pd.DataFrame | None = None) -> dict[str, object]:
    """One cost row (``stage``: the scoring scope, e.g. pair_only or window): judgments (planned inputs),
    requests (unique inputs), tokens, wall-clock, gaps, and wall-clock per window (per query judged).

    ``wall_s`` is the stage's measured wall-clock (the judgments' stored shares of it); ``request_s`` the seconds
    of every request summed, which exceeds ``wall_s`` by about the number of requests in flight
    (docs/protocol.md#judging-cost).

    Usage comes from the cache, i.e. from when each input was actually scored, so a rerun
    served from the cache reports the original cost, not zero. ``truncated`` counts requests whose text was cut
    to the scorer's input budget (they were judged on part of it). ``timed_by_suite`` counts requests
    whose scorer reported no time of its own: their ``seconds`` is their chunk's wall-clock shared
    equally (``rankers.scorers.cache``). A listwise or pairwise judge passes its ``calls`` (one row per
    model judgment used): judgments and requests then count model judgments (:func:`judgment_cost`).
    """
    if calls is not None:
        return judgment_cost(stage, frame, calls)
    unique = frame.drop_duplicates(["qid", "pid"])
    windows = int(frame["qid"].nunique())
    in_tok, missing_in = _usage_sum(unique["usage"], "input_tokens")
    out_tok, _ = _usage_sum(unique["usage"], "output_tokens")
    lat, missing_lat = _usage_sum(unique["usage"], "latency_s")
    secs, missing_secs = _usage_sum(unique["usage"], "seconds")
    shared, _ = _usage_sum(unique["usage"], "seconds_shared")
    truncated, _ = _usage_sum(unique["usage"], "truncated")
    wall = _wall(unique["usage"])
    return {
        "stage": stage,
        "judgments": len(frame),
        "requests": len(unique),
        "input_tokens": in_tok,
        "output_tokens": out_tok,
        "wall_s": wall,
        "request_s": lat + secs,
        "unavailable": int(unique["score"].isna().sum()),
        "truncated": int(truncated),
        "missing_usage": max(missing_in, min(missing_lat, missing_secs)),
        "timed_by_suite": int(shared),
        "windows": windows,
        "wall_s_per_window": wall / windows if windows else float("nan"),
    }


def judgment_cost(stage: str, frame: pd.DataFrame, calls: pd.DataFrame) -> dict[str, object]:
    """The cost row of a judge that judges several passages at once (listwise lists, pairwise comparisons).

    ``judgments``: model judgments the windows used (a comparison two windows share counts twice);
    ``requests``: distinct judgments, each made once (now or by the run that cached it), whose tokens and
    request seconds (``request_s``) are summed and whose wall-clock shares make ``wall_s``; ``unavailable``:
    distinct judgments unusable; ``truncated``: distinct judgments whose
    prompt had a text cut to its budget; ``windows``: queries judged, with the
    wall-clock per window and per judgment. Order-check judgments (windows presented reversed) are included:
    they are what the check cost.
    """
    unique = calls.drop_duplicates("key")
    n, windows = len(unique), int(frame["qid"].nunique())
    wall = _wall(unique["usage"] if "usage" in unique else [{"latency_s": v} for v in unique["latency_s"]])
    return {
        "stage": stage,
        "judgments": len(calls),
        "requests": n,
        "input_tokens": float(np.nansum(unique["input_tokens"].to_numpy(dtype=float))),
        "output_tokens": float(np.nansum(unique["output_tokens"].to_numpy(dtype=float))),
        "wall_s": wall,
        "request_s": float(np.nansum(unique["latency_s"].to_numpy(dtype=float))),
        "unavailable": int((~unique["available"].astype(bool)).sum()),
        "truncated": int(np.nansum(unique["truncated"].to_numpy(dtype=float))) if "truncated" in unique else 0,
        "missing_usage": int(unique["latency_s"].isna().sum()),
        "windows": windows,
        "wall_s_per_window": wall / windows if windows else float("nan"),
        "wall_s_per_judgment": wall / n if n else float("nan"),
        "fallback_windows": int(frame.loc[frame["score"].isna(), "qid"].nunique()),
    }


def ranking_cost(stage: str, ranking: Ranking) -> dict[str, object]:
    """One cost row for a full-pool ranking: the pool rows it ordered and the wall-clock of computing it.

    ``wall_s`` is measured when the ranking is computed and kept with it (``Ranking.info``), so a
    memoized ranking reports what it cost then (training a model on the way included), not zero.
    """
    return {"stage": stage, "judgments": len(ranking.frame), "requests": np.nan, "input_tokens": np.nan,
            "output_tokens": np.nan, "wall_s": float(ranking.info.get("wall_s", np.nan)), "request_s": np.nan,
            "unavailable": 0,
            "truncated": np.nan,
            "missing_usage": 0 if "wall_s" in ranking.info else len(ranking.frame), "timed_by_suite": 0}


def _merge(window: Ranking, fusion: Ranking, rerank_qids: set[str], name: str) -> Ranking:
    """Reranked order for the chosen queries, fusion order (and keys) for the rest."""
    w = window.frame[window.frame["qid"].isin(rerank_qids)]
    f = fusion.frame[~fusion.frame["qid"].isin(rerank_qids)]
    frame = pd.concat([w, f], ignore_index=True).sort_values(["qid", "rank"], kind="mergesort").reset_index(drop=True)
    return Ranking(name, frame, window.fallback & frozenset(rerank_qids))


def margin_rule_queries(fusion: Ranking, margin: float = MARGIN_SKIP) -> set[str]:
    """Queries to rerank under rule A: fusion's top-two score margin below ``margin``."""
    top = fusion.frame[fusion.frame["rank"] <= 2].sort_values(["qid", "rank"])
    k0 = top.groupby("qid")["k0"].agg(lambda s: s.iloc[0] - s.iloc[1] if len(s) > 1 else np.inf)
    return set(k0.index[k0 < margin])


def route_rule_queries(pool: pd.DataFrame) -> set[str]:
    """Queries to rerank under rule B: the routes' top-1 passages disagree, or a route returned nothing."""
    winners = []
    for route in ("dense", "sparse", "bm25"):
        top = pool[pool[f"{route}_rank"] == 1].set_index("qid")["pid"].rename(route)
        winners.append(top)
    table = pd.concat(winners, axis=1).reindex(pool["qid"].unique())
    missing = table.isna().any(axis=1)
    disagree = table.nunique(axis=1, dropna=True) > 1
    return set(table.index[missing | disagree])


def judgments(fusion: Ranking, qids: set[str], k: int) -> int:
    """Window inputs a replay would have needed: min(k, pool size) per reranked query."""
    sizes = fusion.frame.groupby("qid").size()
    return int(np.minimum(sizes[sizes.index.isin(qids)], k).sum())


def replay_rows(fusion: Ranking, scores: dict[tuple[str, str], float], pool: pd.DataFrame, strict_of,
                k_full: int = 20, k_small: int = 3) -> list[dict[str, object]]:
    """K=3 window replay and the two conditional rules, each with strict successes and judgments saved.

    ``strict_of(ranking) -> (strict count, n)`` evaluates a replayed ranking on the same Q_c.
    """
    all_q = set(fusion.frame["qid"])
    full = window_rerank(fusion, scores, k=k_full, name="replay_k20")
    full_j = judgments(fusion, all_q, k_full)
    plans = [
        ("replay_k20", full, all_q, k_full),
        (f"replay_k{k_small}", window_rerank(fusion, scores, k=k_small, name=f"replay_k{k_small}"), all_q, k_small),
        ("rule_fusion_margin", _merge(full, fusion, margin_rule_queries(fusion), "rule_fusion_margin"),
         margin_rule_queries(fusion), k_full),
        ("rule_route_disagreement", _merge(full, fusion, route_rule_queries(pool) & all_q, "rule_route_disagreement"),
         route_rule_queries(pool) & all_q, k_full),
    ]
    rows = []
    for stage, ranking, qids, k in plans:
        strict, n = strict_of(ranking)
        j = judgments(fusion, qids, k)
        rows.append({"stage": stage, "judgments": j, "strict": strict, "n": n,
                     "judgments_saved_pct": 100.0 * (1 - j / full_j) if full_j else float("nan")})
    return rows
