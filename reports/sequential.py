"""Anytime-valid tests and confidence sequences for sequential samples (docs/statistics.md#sequential-samples).

A sequential sample judges whole source groups batch by batch in one seeded order and looks
at every claim after each batch. A fixed-sample p-value read after every batch, with a stop
at the first rejection, is no longer a p-value (``peeking``); these are:

- **testing by betting** (Waudby-Smith & Ramdas, "Estimating means of bounded random
  variables by betting", JRSS-B 2023): a group's contribution D_g (its summed per-direction
  difference, each in [−1, 1]) is bounded by the largest group size c, known from the design
  before any judgment, so x_g = D_g / c lies in [−1, 1]. Against "E[D_g] ≤ 0" a bettor stakes
  the predictable fraction λ_g ∈ [0, 0.9] (aGRAPA: the running mean over the running second
  moment, from earlier groups only) and holds the wealth K_t = Π_{g ≤ t} (1 + λ_g x_g). Under
  the null K is a nonnegative supermartingale, so by Ville's inequality P(sup_t K_t ≥ 1/a) ≤ a,
  and p_t = 1 / max_{s ≤ t} K_s is a p-value at every stopping time. Each side bets on its own;
- **confidence sequences** by inverting the same test at every δ: the Δ values whose shifted
  contributions D_g − δ n_g neither side has bet away (each at α/2) form an interval that covers
  Δ at every stopping time with probability ≥ 1 − α;
- **planning**: the expected directions to a verdict for an assumed effect, by simulation on
  the design's group sizes, beside the fixed design's MDE and power for the decision test itself (``plan``).

Everything here is numpy over arrays whose last axis is the groups in their sampling order, so
the calibration tests run thousands of sequential samples at once.
"""
from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from reports.group_tests import mean_test_rows
from reports.stats import ALPHA, POWER, holm
from reports.table_registry import STOP_COLUMNS

#: The largest fraction of wealth a bettor stakes on one group: any value below 1 keeps the wealth positive.
#: WSR 2023 truncate at ½ or ¾; NevIR's group sums, far inside their bound, need larger stakes to grow
#: (docs/statistics.md#sequential-samples).
MAX_BET = 0.9
#: Prior second moment of x, counted as one earlier group: the first stakes stay small until groups are seen.
PRIOR_MOMENT = 0.25
#: Grid of Δ values (per direction, in [−1, 1]) a confidence sequence is read from.
GRID = np.linspace(-1.0, 1.0, 801)


def log_wealth(x: np.ndarray) -> np.ndarray:
    """Log wealth after each group of a bettor against "mean ≤ 0" on x ∈ [−1, 1] (last axis: groups in order).

    The bet on group t is the aGRAPA fraction μ̂ / (μ̂² + σ̂²) of the groups before it (a smoothed
    running mean and second moment), clipped to [0, ``MAX_BET``]: predictable, so the wealth is
    a supermartingale under the null whatever the bets are.
    """
    x = np.asarray(x, dtype=float)
    if x.size and (np.abs(x) > 1 + 1e-12).any():
        raise ValueError("betting contributions must lie in [-1, 1]; scale them by the largest group size")
    t = np.arange(1, x.shape[-1] + 1, dtype=float)
    before = np.cumsum(x, axis=-1) - x  # sums of the earlier groups
    before_sq = np.cumsum(x * x, axis=-1) - x * x
    mean = before / t  # smoothed: one prior observation at 0
    moment = (PRIOR_MOMENT + before_sq) / t
    bet = np.clip(mean / np.maximum(moment, 1e-12), 0.0, MAX_BET)
    return np.cumsum(np.log1p(bet * x), axis=-1)


def anytime_p(x: np.ndarray) -> np.ndarray:
    """p_t = min(1, 1 / max_{s ≤ t} K_s) against "mean ≤ 0", after each group (non-increasing in t)."""
    running = np.maximum.accumulate(log_wealth(x), axis=-1)
    return np.minimum(1.0, np.exp(-np.maximum(running, 0.0)))


@dataclass(frozen=True)
class SequentialTest:
    """One claim's anytime-valid test on a sequential sample, after each of its groups in sampling order.

    ``p_greater`` tests against Δ > boundary (the wealth of a bettor on "≤"), ``p_less`` against
    Δ < boundary; both are valid at any stopping time. ``lo``/``hi`` are the (1 − α) confidence
    sequence for Δ (in the measure's unit) at the last group; ``sums``/``sizes`` each group's D_g and n_g in sampling
    order and ``scale`` the measure's, what a decision interval inverts the test on (``reports.decision_intervals``).
    """

    p_greater: np.ndarray
    p_less: np.ndarray
    lo: float
    hi: float
    bound: float
    n: int
    n_groups: int
    sums: tuple[float, ...] = ()
    sizes: tuple[float, ...] = ()
    scale: float = 1.0


def _scaled(d: np.ndarray, n: np.ndarray, bound: float, delta: np.ndarray | float) -> np.ndarray:
    """(D_g − δ n_g) / (c (1 + |δ|)): each group's shifted contribution in [−1, 1]."""
    delta = np.asarray(delta, dtype=float)[..., None]
    return (d - delta * n) / (bound * (1.0 + np.abs(delta)))


def sequential_test(d: Sequence[float], n: Sequence[int], bound: float, scale: float = 1.0, boundary: float = 0.0,
                    alpha: float = ALPHA) -> SequentialTest:
    """The anytime-valid tests and confidence sequence of Δ = scale × Σ D_g / Σ n_g (see the module doc).

    ``d``: each group's summed per-direction difference (each difference in [−1, 1]), ``n``: its
    directions, both in sampling order; ``bound``: the largest group size of the design (≥ every
    n_g), fixed before any judgment; ``boundary``: the claim's boundary in the measure's unit.
    """
    d, n = np.asarray(d, dtype=float), np.asarray(n, dtype=float)
    if d.shape != n.shape or d.ndim != 1:
        raise ValueError(f"group sums and sizes must be aligned 1-d arrays; got {d.shape} and {n.shape}")
    if len(n) and (n.max() > bound or (np.abs(d) > n + 1e-9).any()):
        raise ValueError(f"a group exceeds the design's bound: sizes up to {n.max():g}, bound {bound:g}, "
                         "or |D_g| > n_g")
    if len(d) == 0:
        nan = float("nan")
        return SequentialTest(np.ones(0), np.ones(0), nan, nan, bound, 0, 0)
    b = boundary / scale
    up = anytime_p(_scaled(d, n, bound, b))
    down = anytime_p(-_scaled(d, n, bound, b))
    # Confidence sequence: every δ neither side has rejected at α/2 by the last group (a running max, so it only
    # shrinks as groups are added).
    grid_up = anytime_p(_scaled(d, n, bound, GRID))[:, -1]
    grid_down = anytime_p(-_scaled(d, n, bound, GRID))[:, -1]
    kept = GRID[(grid_up > alpha / 2) & (grid_down > alpha / 2)]
    lo, hi = (scale * float(kept.min()), scale * float(kept.max())) if kept.size else (float("nan"), float("nan"))
    return SequentialTest(up, down, lo, hi, bound, int(n.sum()), len(n), tuple(d.tolist()), tuple(n.tolist()), scale)


def holm_decided(p_claimed: Sequence[float], p_opposite: Sequence[float], hypotheses: int,
                 alpha: float = ALPHA) -> np.ndarray:
    """Which claims Holm decides (either side adjusted p ≤ α) when the family holds ``hypotheses`` hypotheses
    and the ones not given here count as p = 1 (a decision here stands whatever their p-values turn out)."""
    p = [*p_claimed, *p_opposite]
    if hypotheses < len(p):
        raise ValueError(f"a family of {hypotheses} hypotheses cannot hold the {len(p)} given")
    adjusted = holm([*p, *[1.0] * (hypotheses - len(p))])
    k = len(p_claimed)
    return (adjusted[:k] <= alpha) | (adjusted[k:len(p)] <= alpha)


# ---- where a sample stopped: sequential.csv's typed columns, read by report.md, the terminal and the explorer -------

@dataclass(frozen=True)
class StoppingPoint:
    """Where a claim's sequential sample stopped (look, groups, directions, judgments, why) and the look that decided
    the claim, if one did: what its verdict line says beside the verdict (docs/statistics.md#sequential-samples)."""

    sample: str
    look: int
    groups: int
    directions: int
    judgments: int
    stop: str
    reason: str
    decided_look: int | None = None
    decided_groups: int | None = None
    decided_directions: int | None = None
    decided_judgments: int | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> StoppingPoint:
        """The point from one sequential.csv row (its ``STOP_COLUMNS``; a column pandas read as float is cast)."""
        def count(key: str) -> int | None:
            value = row.get(key)
            return None if value is None or pd.isna(value) else int(value)
        return cls(str(row["sample"]), count("look"), count("stop_groups"), count("stop_directions"),
                   count("stop_judgments"), str(row["stop"]), str(row["stop_reason"]), count("decided_look"),
                   count("decided_after_groups"), count("decided_directions"), count("decided_judgments"))

    def record(self) -> dict[str, Any]:
        """The point as plain JSON values (the explorer page's data)."""
        return dict(vars(self))

    def words(self) -> str:
        """The point in one plain-text clause, e.g. "sequential sample grader_pairs stopped at look 10: 38 groups,
        150 directions, 300 judgments (budget spent: ...); decided at look 3 (12 groups, 46 directions, 92
        judgments)"."""
        out = (f"sequential sample {self.sample} stopped at look {self.look}: "
               f"{_held(self.groups, self.directions, self.judgments)} ({self.reason})")
        if self.decided_look is not None:
            out += (f"; decided at look {self.decided_look} "
                    f"({_held(self.decided_groups, self.decided_directions, self.decided_judgments)})")
        return out


def _held(groups: int, directions: int, judgments: int) -> str:
    """"1 group, 4 directions, 8 judgments": what a look held and spent, each count with its noun's number."""
    return ", ".join(f"{n:,} {noun}{'' if n == 1 else 's'}"
                     for n, noun in ((groups, "group"), (directions, "direction"), (judgments, "judgment")))


def stopping_points(sequential: pd.DataFrame | None) -> dict[str, StoppingPoint]:
    """claim -> where its sample stopped, from a split's sequential.csv (empty without one, or without its stop
    columns: a table written before they existed)."""
    if sequential is None or not len(sequential) or not set(STOP_COLUMNS) <= set(sequential.columns):
        return {}
    return {str(r["claim"]): StoppingPoint.from_row(r) for r in sequential.to_dict("records")}


def stop_lines(sequential: pd.DataFrame | None, claims: pd.DataFrame | None = None) -> list[str]:
    """One line per claim on a sequential sample, with its status when ``claims`` (claims.csv) has it: the terminal
    summary's list of stopping points."""
    status = {} if claims is None or "status" not in claims.columns else \
        dict(zip(claims["claim"].astype(str), claims["status"].astype(str)))
    return [f"{claim}{f' ({status[claim]})' if claim in status else ''}: {point.words()}"
            for claim, point in stopping_points(sequential).items()]


# ---- simulation: the calibration tests and the planning helper share it --------------------------------------------

def holm_last_axis(p: np.ndarray, hypotheses: int) -> np.ndarray:
    """``reports.stats.holm`` along the last axis, for many families at once, with ``hypotheses`` − p.shape[-1]
    more hypotheses at p = 1 (they never lower an adjusted p; the simulations run thousands of families)."""
    k = p.shape[-1]
    if hypotheses < k:
        raise ValueError(f"a family of {hypotheses} hypotheses cannot hold the {k} given")
    order = np.argsort(p, axis=-1, kind="stable")
    ranked = np.take_along_axis(p, order, axis=-1)
    adjusted = np.minimum(1.0, np.maximum.accumulate((hypotheses - np.arange(k)) * ranked, axis=-1))
    out = np.empty_like(adjusted)
    np.put_along_axis(out, order, adjusted, axis=-1)
    return out


def simulate_sequential(x_claims: np.ndarray, sizes: np.ndarray, batch: int, hypotheses: int,
                        max_groups: int, alpha: float = ALPHA) -> dict[str, np.ndarray]:
    """Run sequential samples with a look after every batch, all at once.

    ``x_claims``: (runs, claims, groups) contributions already scaled to [−1, 1] (the claimed side
    positive), ``sizes``: (runs, groups) directions per group in sampling order. Stops a run when
    every claim is decided by Holm over ``hypotheses`` (absent ones at p = 1) or after ``max_groups``.
    Returns per run the groups and directions at the stop, and per claim "holds"/"fails" booleans.
    """
    x_claims, sizes = x_claims[..., :max_groups], sizes[..., :max_groups]
    runs, claims, groups = x_claims.shape
    looks = np.arange(batch, min(max_groups, groups) + batch, batch).clip(max=min(max_groups, groups))
    looks = np.unique(looks)
    p_up = anytime_p(x_claims)[..., looks - 1]  # (runs, claims, looks)
    p_down = anytime_p(-x_claims)[..., looks - 1]
    flat = np.concatenate([p_up, p_down], axis=1)  # (runs, 2 claims, looks)
    adjusted = holm_last_axis(np.moveaxis(flat, 1, -1), hypotheses)  # (runs, looks, 2 claims)
    holds, fails = adjusted[..., :claims] <= alpha, adjusted[..., claims:] <= alpha
    done = (holds | fails).all(axis=-1)  # (runs, looks)
    stop = np.where(done.any(axis=1), done.argmax(axis=1), len(looks) - 1)
    at = np.arange(runs)
    stopped_groups = looks[stop]
    directions = np.take_along_axis(np.cumsum(sizes, axis=1), (stopped_groups - 1)[:, None], axis=1)[:, 0]
    return {"groups": stopped_groups, "directions": directions, "decided": done[at, stop],
            "holds": holds[at, stop], "fails": fails[at, stop]}


def direction_differences(rng: np.random.Generator, sizes: np.ndarray, effect: float, discordant: float,
                          blind: float = 0.6) -> np.ndarray:
    """Per-group sums D_g of simulated paired strict outcomes whose mean difference per direction is ``effect``.

    NevIR's two directions of a pair are negatively correlated: with probability ``blind`` a pair
    is decided query-blind, and its second direction loses what its first gains (d₂ = −d₁, mean 0);
    the other pairs' directions differ independently, by +1 or −1, with the whole effect. ``discordant``
    is the share of directions whose outcomes differ. ``sizes``: (runs, groups) directions per group: whole
    pairs, plus one lone direction where a size is odd (a sample of single directions: sizes of 1), drawn from a
    direction's marginal law (blind: ±1 alike; otherwise leaning by the effect).
    """
    sizes = np.asarray(sizes)
    pairs = sizes // 2
    most = max(1, int(pairs.max()))
    lean = effect / (1.0 - blind)
    p_plus, p_minus = (discordant + lean) / 2, (discordant - lean) / 2
    if min(p_plus, p_minus) < 0 or p_plus + p_minus > 1:
        raise ValueError(f"an effect of {effect} needs more than {discordant:.0%} discordant directions when "
                         f"{blind:.0%} of pairs are query-blind")
    draw = rng.random((*pairs.shape, most, 2))
    own = np.where(draw < p_plus, 1.0, np.where(draw < p_plus + p_minus, -1.0, 0.0))
    is_blind = rng.random((*pairs.shape, most)) < blind
    per_pair = np.where(is_blind, 0.0, own.sum(axis=-1))  # a blind pair: d₂ = −d₁, its sum is 0
    present = np.arange(most) < pairs[..., None]
    if not (sizes % 2).any():
        return (per_pair * present).sum(axis=-1)
    lone_blind, lone = rng.random(pairs.shape) < blind, rng.random(pairs.shape)
    plus = np.where(lone_blind, discordant / 2, p_plus)
    single = np.where(lone < plus, 1.0, np.where(lone < plus + np.where(lone_blind, discordant / 2, p_minus), -1.0,
                                                 0.0))
    return (per_pair * present).sum(axis=-1) + single * (sizes % 2)


def mean_differences(rng: np.random.Generator, sizes: np.ndarray, effect: float, sd: float) -> np.ndarray:
    """Per-group sums of simulated per-direction differences of a [0, 1] measure (MRR): effect + N(0, sd²),
    kept in [−1, 1] (the clip moves the mean a little when the effect is large; the simulation reports it)."""
    most = int(np.asarray(sizes).max())
    d = np.clip(effect + sd * rng.standard_normal((*np.shape(sizes), most)), -1.0, 1.0)
    return (d * (np.arange(most) < np.asarray(sizes)[..., None])).sum(axis=-1)


@dataclass(frozen=True)
class Plan:
    """Expected cost of a verdict for an assumed effect: sequential (simulated) beside the fixed design, whose MDE and
    power are the decision test's (``reports.power.DECISION_TEST``) on the same simulated outcomes."""

    effect: float
    fixed_directions: int
    fixed_mde: float
    fixed_power: float
    mean_directions: float
    median_directions: float
    decided_share: float
    max_directions: int
    runs: int
    decided_directions: float = float("nan")

    def line(self, unit: str = "pts", per_direction: float = 1.0) -> str:
        """The plan in one sentence; ``per_direction``: judgments one direction costs (2 designated, 20 a window)."""
        if self.decided_share > 0:
            spent = (f"decided samples after {self.decided_directions:.0f} directions on average (about "
                     f"{per_direction * self.decided_directions:,.0f} judgments); all samples after "
                     f"{self.mean_directions:.0f} on average (median {self.median_directions:.0f})")
        else:
            spent = f"every sample spends its budget ({self.mean_directions:.0f} directions on average)"
        return (f"assumed effect {self.effect:+.3g} {unit}: sequential decides in {100 * self.decided_share:.0f}% of "
                f"{self.runs} simulated samples within {self.max_directions} directions, {spent} (the plan's model; "
                f"the fixed {self.fixed_directions}-direction sample: the first line)")


def simulated_differences(sizes: np.ndarray, runs: int, seed: int, effect: float, discordant: float, blind: float,
                 sd: float | None, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """(groups in each run's random order (runs, G), their simulated sums D_g): the orders and the outcome draws
    come from seeds of their own, so every assumed effect meets the same orders and the same uniforms (common
    random numbers: power rises with the effect in every simulated sample)."""
    order = np.argsort(np.random.default_rng(seed).random((runs, len(sizes))), axis=1)
    drawn = sizes[order]
    rng = np.random.default_rng((seed, 1))
    d = direction_differences(rng, drawn, effect / scale, discordant, blind) if sd is None \
        else mean_differences(rng, drawn, effect / scale, sd)
    return drawn, d


def _fixed_holds(drawn: np.ndarray, d: np.ndarray, fixed_directions: int, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Whether the decision test (``mean_test``'s parts, ``mean_test_rows``) says *holds* at one-sided ``level`` on
    each run's fixed sample (its first groups within ``fixed_directions``), and the sample's directions."""
    groups = np.maximum(1, (np.cumsum(drawn, axis=1) <= fixed_directions).sum(axis=1))
    holds = np.zeros(len(drawn), dtype=bool)
    for g in np.unique(groups):
        rows = groups == g
        greater, _ = mean_test_rows(d[rows, :g], float(drawn[rows, :g].max()))
        holds[rows] = greater <= level
    return holds, (drawn * (np.arange(drawn.shape[1]) < groups[:, None])).sum(axis=1)


@functools.lru_cache(maxsize=64)
def fixed_mde(sizes: tuple[int, ...], fixed_directions: int, level: float, discordant: float, blind: float,
              sd: float | None, scale: float, runs: int, seed: int, target: float = POWER) -> float:
    """The fixed design's MDE for the decision test at one-sided ``level``: the smallest assumed effect at which it
    says *holds* in ``target`` of the simulated fixed samples (one number per design, whatever effect is assumed);
    ∞ when even the largest effect the outcome model allows does not reach it."""
    top = scale * (discordant * (1.0 - blind) if sd is None else 1.0)
    array = np.asarray(sizes, dtype=int)

    def power(effect: float) -> float:
        drawn, d = simulated_differences(array, runs, seed, effect, discordant, blind, sd, scale)
        return float(_fixed_holds(drawn, d, fixed_directions, level)[0].mean())

    lo, hi = 0.0, top
    if power(hi) < target:
        return float("inf")
    while hi - lo > 0.005 * top:  # power rises with the effect (common random numbers): bisect to 0.5% of the range
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if power(mid) >= target else (mid, hi)
    return hi


def plan(sizes: Sequence[int], effect: float, batch: int, max_directions: int, fixed_directions: int,
         hypotheses: int = 2, discordant: float = 0.35, blind: float = 0.6, sd: float | None = None,
         scale: float = 100.0, runs: int = 400, seed: int = 0, alpha: float = ALPHA) -> Plan:
    """Before any judgment: directions to a verdict for an assumed ``effect`` (in the measure's unit, ``scale``
    per unit difference: 100 for strict preference in points, 1 for MRR).

    ``sizes``: the split's eligible group sizes (directions per group); groups are drawn in a
    random order without replacement as the sample draws them. Strict preference (``sd`` None):
    ``discordant`` is the assumed share of directions on which the two rankers differ, ``blind`` the
    share of query-blind pairs (``direction_differences``); a mean measure: per-direction differences
    with SD ``sd`` (``mean_differences``). ``hypotheses``: the family's size (Holm). The fixed design's
    power is the decision test's on the same simulated outcomes at ``fixed_directions``, at Holm's first-step
    level α / ``hypotheses``, and its MDE (``fixed_mde``) the same for every assumed effect.
    """
    sizes = np.asarray(sizes, dtype=int)
    drawn, d = simulated_differences(sizes, runs, seed, effect, discordant, blind, sd, scale)
    bound = float(sizes.max())
    max_groups = int(np.maximum(1, (np.cumsum(drawn, axis=1) <= max_directions).sum(axis=1)).min())
    result = simulate_sequential((d / bound)[:, None, :], drawn, batch, hypotheses, max_groups, alpha)
    level = alpha / hypotheses
    holds, n_fixed = _fixed_holds(drawn, d, fixed_directions, level)
    mde = fixed_mde(tuple(sizes.tolist()), fixed_directions, level, discordant, blind, sd, scale, runs, seed)
    dirs = result["directions"].astype(float)
    decided = result["decided"]
    return Plan(effect, int(np.median(n_fixed)), mde, float(holds.mean()), float(dirs.mean()), float(np.median(dirs)),
                float(decided.mean()), max_directions, runs,
                float(dirs[decided].mean()) if decided.any() else float("nan"))
