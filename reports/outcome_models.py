"""Outcome models a fixed design's power is computed under: the plan's and the plausible others
(docs/statistics.md#outcome-models).

The power of the decision test (``reports.group_tests.mean_test``) at an effect depends on how the effect is
spread over a sample's units, not only on its size: with the same share of discordant directions, two rankers that
decide pairs query-blind at different rates make more units differ than the plan's model, whose query-blind pairs
never differ. A number printed from one model over-promises under another, so the plan prints each model's MDE and
power, each power with its simulation SE, and its first line is the worst case (``python -m harness.plan``). Each
model draws per-unit summed differences D_u for a matrix of unit sizes (runs × units, in a random order per run);
the fixed sample is each run's first units within its size, and the test is the decision test's own parts
(``mean_test_rows``, which decide every simulated sample as the shipped ``mean_test`` does, up to the sign-flip
part's Monte Carlo draws):

- **plan**: ``reports.sequential.direction_differences``: a share ``blind`` of pairs decided query-blind (d₂ = −d₁,
  the pair's sum 0), the others' directions differing independently by ±1 with the whole effect;
- **two rankers query-blind**: each ranker decides a pair query-blind at its own rate (the candidate at ``blind``,
  the baseline at ``BASELINE_BLIND``: one direction right, one wrong, which one at random), and otherwise each
  direction right with its own probability; on a share 2 × ``discordant`` of pairs the two decide independently
  (so a share ``discordant`` of directions differ), elsewhere alike;
- **whole units** (two correlated rankers): on a share 2 × ``discordant`` of units the candidate decides the unit
  as a whole, every direction right (with the probability the effect sets) or every one wrong, as a ranker that
  reads a pair's negation or does not; the baseline is query-blind on a share of pairs (one direction right, one
  wrong) and otherwise right by a coin, and elsewhere the two agree. Each decided direction differs with
  probability 1/2, so the same share ``discordant`` of directions differ, but a unit's differences lean the same
  way: no query-blind pair cancels, and the unit sums spread more than under the query-blind models;
- **resampled**: units drawn with replacement from a previous run's per-unit differences of the same two rankers
  (``ResampledModel``), each keeping its size and |D_u| with a sign drawn anew and moved by the effect in
  proportion to it (``reports.power.PowerDesign``'s location shift).
"""
from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from reports.group_tests import mean_test_rows
from reports.power import PowerDesign, TARGET
from reports.sequential import direction_differences

#: The baseline's query-blind share in the two-ranker model: fusion decides about 60% of NevIR's pairs query-blind
#: (docs/statistics.md#calibration).
BASELINE_BLIND = 0.6
#: The plan's defaults: the share of directions two rankers differ on and of pairs decided query-blind.
DISCORDANT, BLIND = 0.45, 0.3


def pair_outcomes(rng: np.random.Generator, shape: tuple[int, ...], blind: float, p_right: float) -> np.ndarray:
    """(*shape, 2) strict outcomes of one ranker on pairs: query-blind with probability ``blind`` (one direction
    right, which one at random), otherwise each direction right with probability ``p_right``."""
    first = rng.random(shape) < 0.5
    is_blind = (rng.random(shape) < blind)[..., None]
    return np.where(is_blind, np.stack([first, ~first], axis=-1), rng.random((*shape, 2)) < p_right)


@dataclass(frozen=True)
class PlanModel:
    """The plan's own model (``direction_differences``)."""

    discordant: float
    blind: float
    name: str = "plan"

    @property
    def words(self) -> str:
        return (f"the plan's model ({self.discordant:.0%} of directions differ, {self.blind:.0%} of pairs "
                "query-blind for both rankers alike)")

    def top(self) -> float:
        """The largest per-direction effect the model allows."""
        return self.discordant * (1.0 - self.blind)

    def draw(self, rng: np.random.Generator, sizes: np.ndarray, effect: float) -> tuple[np.ndarray, np.ndarray]:
        """(the units' sizes, their sums D_u) for units of these sizes at a per-direction ``effect``."""
        return sizes, direction_differences(rng, sizes, effect, self.discordant, self.blind)


@dataclass(frozen=True)
class TwoBlindModel:
    """Two rankers deciding pairs query-blind at different rates (see the module doc)."""

    discordant: float
    blind: float
    baseline_blind: float = BASELINE_BLIND

    @property
    def name(self) -> str:
        return f"two rankers query-blind ({self.blind:.0%} / {self.baseline_blind:.0%})"

    @property
    def words(self) -> str:
        return (f"two rankers query-blind on {self.blind:.0%} / {self.baseline_blind:.0%} of pairs (candidate / "
                f"baseline), deciding {min(1.0, 2 * self.discordant):.0%} of pairs independently "
                f"({self.discordant:.0%} of directions differ)")

    def top(self) -> float:
        return min(1.0, 2 * self.discordant) * (1.0 - self.blind) / 2

    def draw(self, rng: np.random.Generator, sizes: np.ndarray, effect: float) -> tuple[np.ndarray, np.ndarray]:
        independent = min(1.0, 2 * self.discordant)
        right = 0.5 + effect / (independent * (1.0 - self.blind))  # the candidate's, where it is not blind
        if not -1e-9 <= right <= 1.0 + 1e-9:
            raise ValueError(f"an effect of {effect} exceeds what {self.words} allows ({self.top():.3f})")
        right = min(1.0, max(0.0, right))
        sizes = np.asarray(sizes)
        pairs = sizes // 2
        most = max(1, int(pairs.max()))
        shape = (*pairs.shape, most)

        differ = (rng.random(shape) < independent)[..., None]
        d = np.where(differ, pair_outcomes(rng, shape, self.blind, right).astype(float)
                     - pair_outcomes(rng, shape, self.baseline_blind, 0.5), 0.0)
        per_pair = d.sum(axis=-1) * (np.arange(most) < pairs[..., None])
        lone = np.where(rng.random(pairs.shape) < independent,
                        (rng.random(pairs.shape) < 0.5 + effect / independent).astype(float)
                        - (rng.random(pairs.shape) < 0.5), 0.0)  # a lone direction: the marginal laws
        return sizes, per_pair.sum(axis=-1) + lone * (sizes % 2)


@dataclass(frozen=True)
class WholeUnitModel:
    """Two correlated rankers: the candidate decides a share of units as a whole (see the module doc)."""

    discordant: float
    baseline_blind: float = BASELINE_BLIND

    @property
    def name(self) -> str:
        return f"whole units ({self.baseline_blind:.0%})"

    @property
    def share(self) -> float:
        """Units the candidate decides as a whole: each of their directions differs with probability 1/2."""
        return min(1.0, 2 * self.discordant)

    @property
    def words(self) -> str:
        return (f"two correlated rankers: the candidate decides {self.share:.0%} of units as a whole (every direction "
                f"right or every one wrong), the baseline query-blind on {self.baseline_blind:.0%} of pairs; "
                f"elsewhere they agree ({self.share / 2:.0%} of directions differ)")

    def top(self) -> float:
        return self.share / 2

    def draw(self, rng: np.random.Generator, sizes: np.ndarray, effect: float) -> tuple[np.ndarray, np.ndarray]:
        right = 0.5 + effect / self.share  # the candidate's chance to get a unit it decides wholly right
        if not -1e-9 <= right <= 1.0 + 1e-9:
            raise ValueError(f"an effect of {effect} exceeds what {self.words} allows ({self.top():.3f})")
        sizes = np.asarray(sizes)
        pairs = sizes // 2
        most = max(1, int(pairs.max()))
        shape = (*pairs.shape, most)
        decided = rng.random(pairs.shape) < self.share
        whole = (rng.random(pairs.shape) < right).astype(float)
        baseline = pair_outcomes(rng, shape, self.baseline_blind, 0.5)
        d = (whole[..., None, None] - baseline) * (np.arange(most) < pairs[..., None])[..., None]
        lone = (whole - (rng.random(pairs.shape) < 0.5)) * (sizes % 2)  # a lone direction: the baseline's coin
        return sizes, np.where(decided, d.sum(axis=(-2, -1)) + lone, 0.0)


@dataclass(frozen=True)
class ResampledModel:
    """Units resampled from a previous run's per-unit differences (sizes and |D_u|; see the module doc)."""

    design: PowerDesign
    source: str
    name: str = "resampled"

    @property
    def words(self) -> str:
        m = np.asarray(self.design.magnitudes)
        return (f"units resampled from {self.source} ({len(m)} units, {int((m > 0).sum())} differing; |D_u| kept, "
                "signs drawn anew)")

    def top(self) -> float:
        return self.design.effect_at(_top_shift(self.design))

    def draw(self, rng: np.random.Generator, sizes: np.ndarray, effect: float) -> tuple[np.ndarray, np.ndarray]:
        """Units drawn from the previous run's, as many a run as ``sizes`` has columns, each with its own size."""
        pool_sizes, pool_m = np.asarray(self.design.sizes), np.asarray(self.design.magnitudes)
        pick = rng.integers(0, len(pool_sizes), np.shape(sizes))
        shift = min(self.design.shift_for(effect), _top_shift(self.design)) if effect > 0 else 0.0
        signs = np.where(rng.random(np.shape(sizes)) < 0.5, 1.0, -1.0)
        cap = self.design.bound * pool_sizes[pick]
        return pool_sizes[pick], np.clip(pool_m[pick] * (signs + shift), -cap, cap)

    @classmethod
    def of(cls, differences: np.ndarray, units: np.ndarray, source: str) -> ResampledModel:
        """From a previous run's per-direction differences (values in [−1, 1]) and each direction's unit."""
        codes = np.unique(np.asarray(units), return_inverse=True)[1]
        return cls(PowerDesign.of(differences, codes, 1.0), source)


def _top_shift(design: PowerDesign) -> float:
    """The shift at which every differing unit is at its bound: the model's largest effect."""
    m, n = np.asarray(design.magnitudes), np.asarray(design.sizes)
    return float((n[m > 0] * design.bound / m[m > 0]).max()) + 1 if (m > 0).any() else 0.0


#: Simulated fixed samples behind each printed power: its SE is at most 0.5 points (at 50%), so a printed power lies
#: within 1 point of the decision code's in 95% of plans (docs/statistics.md#outcome-models); and behind each step
#: of an MDE's bisection, whose power is then printed from the others.
POWER_RUNS = 10_000
MDE_RUNS = 2_000
#: Samples simulated at once, each block from a seed of its own (memory; a check can redraw one block alone).
BLOCK = 2_000


@dataclass(frozen=True)
class ModelPower:
    """One model's MDE (the effect's unit; ∞ beyond what it allows), the power there and at each assumed effect (NaN
    beyond what the model allows), each from ``runs`` simulated samples of their own."""

    model: str
    words: str
    mde: float
    power_at_mde: float
    powers: tuple[float, ...]
    runs: int

    def se(self, power: float) -> float:
        """The simulation standard error of a power this row prints."""
        return math.sqrt(power * (1 - power) / self.runs)


def draw_samples(model, sizes: np.ndarray, runs: int, seed: int | tuple[int, ...], effect: float,
                 first: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(unit sizes in each run's order, their sums): the orders and outcome draws from seeds of their own, as
    ``reports.sequential.simulated_differences`` draws them (common random numbers across effects). ``first``: only
    each order's first units (a fixed sample of at most that many directions holds no more), the same ones."""
    entropy = tuple(int(x) for x in np.atleast_1d(seed))
    keys = np.random.default_rng(entropy).random((runs, len(sizes)))
    if first is not None and first < len(sizes):
        kept = np.argpartition(keys, first - 1, axis=1)[:, :first]
        order = np.take_along_axis(kept, np.argsort(np.take_along_axis(keys, kept, axis=1), axis=1), axis=1)
    else:
        order = np.argsort(keys, axis=1)
    return model.draw(np.random.default_rng((*entropy, 1)), sizes[order], effect)


def fixed_holds(drawn: np.ndarray, d: np.ndarray, fixed_directions: int, level: float) -> np.ndarray:
    """Whether the decision test says *holds* at one-sided ``level`` on each run's first units within
    ``fixed_directions`` (the fixed sample)."""
    units = np.maximum(1, (np.cumsum(drawn, axis=1) <= fixed_directions).sum(axis=1))
    holds = np.zeros(len(drawn), dtype=bool)
    for g in np.unique(units):
        rows = units == g
        holds[rows] = mean_test_rows(d[rows, :g], float(drawn[rows, :g].max()))[0] <= level
    return holds


def model_power(model, sizes: np.ndarray, fixed_directions: int, level: float, effect: float, runs: int,
                seed: int) -> float:
    """The decision test's power on the fixed design under ``model`` at a per-direction ``effect``: ``runs`` samples
    in blocks of ``BLOCK``, block k drawn from seed (``seed``, k)."""
    holds = [fixed_holds(*draw_samples(model, np.asarray(sizes, dtype=int), min(BLOCK, runs - start), (seed, k),
                                       effect, fixed_directions), fixed_directions, level)
             for k, start in enumerate(range(0, runs, BLOCK))]
    return float(np.concatenate(holds).mean())


@functools.lru_cache(maxsize=64)
def model_mde(model, sizes: tuple[int, ...], fixed_directions: int, level: float, runs: int, seed: int,
              target: float = TARGET) -> float:
    """The smallest per-direction effect at which the decision test holds in ``target`` of the model's fixed
    samples (bisected to 0.5% of the model's range); ∞ when its largest effect does not reach it."""
    top = model.top()
    array = np.asarray(sizes, dtype=int)
    lo, hi = 0.0, top
    if model_power(model, array, fixed_directions, level, hi, runs, seed) < target:
        return math.inf
    while hi - lo > 0.005 * top:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if model_power(model, array, fixed_directions, level, mid, runs, seed) >= target \
            else (mid, hi)
    return hi


def family_power(models, sizes: np.ndarray, fixed_directions: int, level: float, effects: Sequence[float],
                 scale: float, seed: int = 0, mde_runs: int = MDE_RUNS, power_runs: int = POWER_RUNS
                 ) -> list[ModelPower]:
    """Each model's MDE (bisected on ``mde_runs`` samples a step) and the decision test's power there and at each
    assumed effect, all in the effect's unit (``scale`` per unit difference). The printed powers come from
    ``power_runs`` samples of another seed than the bisection's, so the MDE's search does not flatter its own
    power."""
    out = []
    for model in models:
        mde = model_mde(model, tuple(np.asarray(sizes, dtype=int).tolist()), fixed_directions, level, mde_runs, seed)

        def power(effect: float) -> float:  # per-direction effect
            if not effect <= model.top():
                return math.nan
            return model_power(model, sizes, fixed_directions, level, effect, power_runs, seed + 1)

        out.append(ModelPower(model.name, model.words, scale * mde, power(mde),
                              tuple(power(e / scale) for e in effects), power_runs))
    return out


def outcome_family(discordant: float = DISCORDANT, blind: float = BLIND) -> list:
    """The models a plan's worst case is taken over (a previous run's resampled units join them where the plan has
    one): the plan's, two rankers query-blind at different rates, two correlated rankers deciding whole units, each
    with the baseline never and on ``BASELINE_BLIND`` of pairs query-blind."""
    return [PlanModel(discordant, blind), TwoBlindModel(discordant, blind, 0.0), TwoBlindModel(discordant, blind),
            WholeUnitModel(discordant, 0.0), WholeUnitModel(discordant)]


@functools.lru_cache(maxsize=16)
def directions_to_decide(sizes: tuple[int, ...], level: float, effect: float, runs: int = 400, seed: int = 0,
                         target: float = TARGET) -> int | None:
    """About the fewest directions, whole units in a random order, at which the decision test holds at one-sided
    ``level`` in ``target`` of the samples under every model of ``outcome_family`` at a per-direction ``effect`` (to
    10%, ``runs`` samples a model: an estimate said before any work); None when all of ``sizes`` is not enough."""
    array = np.asarray(sizes, dtype=int)

    def enough(directions: int) -> bool:  # the correlated models first: they need the most
        return all(model_power(m, array, directions, level, effect, runs, seed) >= target
                   for m in reversed(outcome_family()))

    lo, hi = 0, int(array.sum())
    if not enough(hi):
        return None
    while hi - lo > max(2, hi // 10):
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return hi
