"""Fixed fusion, the reference ranker (``docs/protocol.md#fusion``).

Per query and route: keep a raw score only if it reaches the route threshold,
apply log(1+s) to sparse and BM25, min–max normalize over the query's retained
scores (all equal → 1.0 each), weight dense 0.70 / sparse 0.15 / BM25 0.15
renormalized over the routes that retained at least one score for that query;
a missing or filtered contribution is 0. Filtering changes contributions, never
pool membership. Everything is vectorized over the whole pool with a groupby
on qid, so fusing every Test direction takes well under a second.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from rankers.base import Ranking, single_score_ranking


@dataclass(frozen=True)
class RouteRule:
    """How one route enters the fused score."""

    route: str
    threshold: float  # on the raw score, before any transform
    log1p: bool
    weight: float


#: The fusion constants, in one reviewed place.
FUSION_RULES: tuple[RouteRule, ...] = (
    RouteRule("dense", threshold=0.30, log1p=False, weight=0.70),
    RouteRule("sparse", threshold=0.20, log1p=True, weight=0.15),
    RouteRule("bm25", threshold=0.0, log1p=True, weight=0.15),
)


def route_contributions(pool: pd.DataFrame, rule: RouteRule, qid_codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One route's normalized contribution per row (0 where not retained) and whether its query retained any score."""
    raw = pool[f"{rule.route}_score"].to_numpy(dtype=np.float64)
    kept = raw >= rule.threshold  # NaN (route did not return the passage) compares False
    value = np.where(kept, np.log1p(np.where(kept, raw, 0.0)) if rule.log1p else raw, np.nan)
    grouped = pd.Series(value).groupby(qid_codes)
    lo = grouped.transform("min").to_numpy()
    hi = grouped.transform("max").to_numpy()
    span = hi - lo
    norm = np.divide(value - lo, span, out=np.ones_like(value), where=span > 0)
    return np.where(kept, norm, 0.0), ~np.isnan(hi)


def declared_rules(weights: Mapping[str, float] | None = None,
                   thresholds: Mapping[str, float] | None = None) -> tuple[RouteRule, ...]:
    """The protocol's rules with some weights or thresholds replaced (a declared fusion variant); unknown routes fail."""
    changes = {"weight": dict(weights or {}), "threshold": dict(thresholds or {})}
    for what, values in changes.items():
        unknown = sorted(set(values) - {r.route for r in FUSION_RULES})
        if unknown:
            raise ValueError(f"fusion {what}s name unknown routes {unknown}; routes: {[r.route for r in FUSION_RULES]}")
    return tuple(replace(r, weight=float(changes["weight"].get(r.route, r.weight)),
                         threshold=float(changes["threshold"].get(r.route, r.threshold))) for r in FUSION_RULES)


def fusion_scores(pool: pd.DataFrame, rules: tuple[RouteRule, ...] = FUSION_RULES) -> np.ndarray:
    """Fused score per pool row (aligned with ``pool``); a query with no retained score gets 0 everywhere."""
    qid_codes, _ = pd.factorize(pool["qid"])
    total = np.zeros(len(pool))
    weight = np.zeros(len(pool))
    for rule in rules:
        contribution, active = route_contributions(pool, rule, qid_codes)
        total += rule.weight * contribution
        weight += rule.weight * active
    return np.divide(total, weight, out=np.zeros(len(pool)), where=weight > 0)


def fusion_ranking(pool: pd.DataFrame, rules: tuple[RouteRule, ...] = FUSION_RULES, name: str = "fusion") -> Ranking:
    """The whole pool ordered by fused score (ties by passage id for position only); key (score, 0, 0)."""
    return single_score_ranking(pool, fusion_scores(pool, rules), name)
