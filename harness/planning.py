"""A run's plan: every part of the run, split by split, for each value the profile declares of its parameter.

``PARTS`` lists every kind of part (``harness.parts``, ``harness.window_parts``) and the parameter it ranges
over; ``parameters`` lists what the profile declares by those parameter names (a ranker, a claim, a pin, a
population); ``plan`` crosses them with the run's splits. The engine (``harness.run.RunBuilder``) computes the
plan; the root conftest parametrizes the specs over the same lists, so a spec and its part name the same values.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fixtures.settings import SPLITS, Settings
from harness.claims import designated_twins, h2_claims, h3_claims, same_scorer, tie_twins
from harness.parts import (Part, comparison, coverage_gate, gates, h2, h3, manifest, margins, pairwise,
                           perturbed_claim, perturbed_ranker, pin, seed_spread, sequential, table1, table2_row,
                           tie_resolution)
from harness.window_parts import (cost, designated_vs_window, endpoints, order_bias, pair_only, tie_branch,
                                  unavailable)
from harness.profile_records import Profile
from rankers.declarations import RankerDecl


#: Every part of a run, in the order ``evaluate`` computes them, with the parameter each ranges over.
PARTS: tuple[Part, ...] = (
    Part("manifest", None, manifest),
    Part("margins", None, margins),
    Part("table1", "population", table1),
    Part("table2_row", "ranker", table2_row),
    Part("gates", "gated_ranker", gates),
    Part("coverage_gate", None, coverage_gate),
    Part("pairwise", "ranked_population", pairwise),
    Part("seed_spread", "seeded_ranker", seed_spread),
    Part("comparison", "comparison", comparison),
    Part("perturbed_claim", "trained_comparison", perturbed_claim),
    Part("perturbed_ranker", "trained_ranker", perturbed_ranker),
    Part("h2", "h2_claim", h2),
    Part("tie_branch", "window_ranker", tie_branch),
    Part("h3", "graded_ranker", h3),
    Part("tie_resolution", "tie_twin", tie_resolution),
    Part("pair_only", "window_ranker", pair_only),
    Part("cost", "window_ranker", cost),
    Part("designated_vs_window", "designated_twin", designated_vs_window),
    Part("order_bias", "window_ranker", order_bias),
    Part("unavailable", "window_ranker", unavailable),
    Part("endpoints", "window_ranker", endpoints),
    Part("sequential", "sequential_sample", sequential),
    Part("pin", "pin", pin),
)
#: The parts that decide claims read the session's claim book (their ``book`` argument).
WITH_BOOK = frozenset({"comparison", "perturbed_claim", "h2", "h3", "tie_resolution", "sequential"})

#: Parameters that name a claim (or the ranker whose H3 claim it is): the claims a run measures.
CLAIM_PARAMETERS = ("comparison", "h2_claim", "graded_ranker", "tie_twin")


@dataclass(frozen=True)
class Param:
    """One value a part or spec ranges over, the rankers it computes, and its id in test and part names."""

    value: Any
    decls: tuple[RankerDecl, ...]
    id: str


def parameters(profile: Profile, settings: Settings) -> dict[str, list[Param]]:
    """What the profile declares, by the parameter name the parts and specs range over."""
    decls = profile.rankers

    def rankers(chosen: Iterable[RankerDecl]) -> list[Param]:
        return [Param(d.name, (d,), d.name) for d in chosen]

    def trained(name: str) -> bool:
        return bool(profile.seeds(name, settings.seed))

    distinct: list[RankerDecl] = []  # one per distinct scorer: twins reading the same judgments share it
    for decl in profile.window_rankers():
        if not any(same_scorer(decl, other) for other in distinct):
            distinct.append(decl)
    graded = set(h3_claims(profile).values())
    populations: dict[str, list[RankerDecl]] = {}
    for decl in profile.ordered():
        populations.setdefault(decl.population, []).append(decl)
    scope = settings.run_scope()
    return {
        "population": [Param(s, (), s) for s in SPLITS],
        "ranker": rankers(profile.ordered()),
        "pool_ranker": rankers(d for d in profile.ordered() if not d.is_window),
        "seeded_ranker": rankers(d for d in profile.ordered()
                                 if len(d.ranker_kind.seeds(d.options, settings.seed)) > 1),
        "scored_ranker": rankers(distinct),
        "window_ranker": rankers(profile.window_rankers()),
        "graded_ranker": rankers(d for d in profile.window_rankers() if d.name in graded),
        "h2_claim": [Param(n, (decls[r], decls[v]), n) for n, (r, v, _) in h2_claims(profile).items()],
        "comparison": [Param(c.name, (decls[c.ranker], decls[c.versus]), c.name) for c in profile.comparisons()],
        "trained_ranker": rankers(d for d in profile.ordered() if trained(d.name)),
        "trained_comparison": [Param(c.name, (decls[c.ranker], decls[c.versus]), c.name)
                               for c in profile.comparisons() if trained(c.ranker) or trained(c.versus)],
        "tie_twin": [Param(key, tuple(decls[r] for r in pair), key) for key, pair in tie_twins(profile).items()],
        "designated_twin": [Param(key, tuple(decls[r] for r in pair), key)
                            for key, pair in designated_twins(profile).items()],
        # a sequential sample carries every ranker on it: they decide its stop
        "sequential_sample": [Param(n, tuple(d for d in profile.ordered() if d.population == n), n)
                              for n, s in profile.samples.items()
                              if s.sequential and any(d.population == n for d in decls.values())],
        "ranked_population": [Param(p, tuple(ds), p) for p, ds in populations.items()],
        "gated_ranker": rankers(profile.gated()),
        "pin": [Param(p, (decls[p.ranker],), f"{p.split}-{p.ranker}-{p.measure}")
                for p in profile.pins if p.scope == scope and p.split in settings.splits],
    }


@dataclass(frozen=True)
class PartCall:
    """One planned part: which part, on which split, for which value of its parameter."""

    part: Part
    split: str
    param: Param | None

    @property
    def key(self) -> tuple[str, str, str]:
        return self.part.name, self.split, "" if self.param is None else self.param.id

    @property
    def name(self) -> str:
        return f"{self.part.name}[{self.split}{'' if self.param is None else '-' + self.param.id}]"

    @property
    def rankers(self) -> tuple[str, ...]:
        return () if self.param is None else tuple(d.name for d in self.param.decls)


def plan(profile: Profile, settings: Settings, params: Mapping[str, list[Param]]) -> list[PartCall]:
    """Every part the run's profile declares, split by split (a pin on its own split), in ``PARTS`` order."""
    calls = []
    for split in settings.splits:
        for part in PARTS:
            if part.parameter is None:
                calls.append(PartCall(part, split, None))
            elif part.parameter == "pin":
                calls += [PartCall(part, split, p) for p in params["pin"] if p.value.split == split]
            else:
                calls += [PartCall(part, split, p) for p in params[part.parameter]]
    return calls
