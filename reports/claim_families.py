"""The study's hypotheses as claims: which claims a profile's declarations imply, each in its family.

A claim says an effect lies on one side of 0: "E0's strict preference exceeds fusion's on the same directions",
"the equal-grade branch holds a larger share of failures than of directions". Definitions
(docs/statistics.md#claims):

- **H1** comparisons a profile declares (``[claims.<name>]`` with ranker, versus, measure);
- **H2** every window ranker against its ``compare_to`` ranker, on strict preference and,
  for a fully scored window, MRR; so is every full-pool ranker a user declares (an outside system's
  ``trec_run``, a ``python`` factory ranking the pool), on both, so any ranker can be gated on beating its baseline
  (the shipped profiles' own full-pool rankers are compared by their declared H1 claims);
- **H3** every argmax window ranker on a bounded grade scale: its equal-grade branch;
- **H3x** (beyond the paper) every expected-grade ranker against its argmax twin on the
  twin's equal-grade directions.

A **family** (H1, H2, H3, H3x of the rankers the shipped profiles declare; a user's ranker gets its own,
``H2:<ranker>``) is decided together (``reports.hypotheses``).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rankers.declarations import RankerDecl
from reports.measures import paired_measure

Side = Literal[">", "<"]
#: comparison: ranker vs versus on a measure; tie_branch: H3; tie_resolution: H3x (on the twin's equal-grade directions).
Kind = Literal["comparison", "tie_branch", "tie_resolution"]


@dataclass(frozen=True)
class ClaimDefinition:
    """One claim: ``ranker`` vs ``versus`` on ``measure`` (a comparison, or H3x on the twin's equal-grade
    directions) or a ranker's tie branch (H3)."""

    name: str
    family: str
    kind: Kind
    ranker: str
    versus: str = ""
    measure: str = ""
    side: Side = ">"

    def __post_init__(self) -> None:
        if self.side not in (">", "<"):
            raise ValueError(f"claim {self.name!r}: side must be '>' or '<'; got {self.side!r}")

    @property
    def claimed(self) -> str:
        """The claim itself, e.g. ``> 0``."""
        return f"{self.side} 0"


#: Why a claim's verdict depends on its family, said wherever a user's own family sits beside the study's
#: (docs/statistics.md#families).
FAMILY_RULE = ("Each claim is decided in its family, Holm-corrected over both sides of every claim in it: the study's "
               "rankers in H1, H2, H3 and H3x, each ranker you add in a family of its own (H2:<ranker>), so adding one "
               "never changes a study verdict. The correction grows with the family's size, so the same numbers can be "
               "decided in a small family and left inconclusive in a large one.")
#: What makes two claims' numbers the same: the measure, the baseline, the directions and the effect measured.
SAME_NUMBERS = ("measure", "versus", "n", "effect")


def seed_words(seeds: Sequence[int]) -> str:
    """Which training seeds a number is from, in the words every output uses beside it (docs/statistics.md#seeds):
    ``seed 13`` for one model (Table II's row of a seeded ranker, a claim's single-seed twin), ``mean of seeds 13–17``
    for the seed average a claim is decided on; "" without seeds."""
    seeds = sorted(set(int(s) for s in seeds))
    if not seeds:
        return ""
    if len(seeds) == 1:
        return f"seed {seeds[0]}"
    run = seeds == list(range(seeds[0], seeds[-1] + 1))
    return f"mean of seeds {seeds[0]}–{seeds[-1]}" if run else "mean of seeds " + ", ".join(map(str, seeds))


def single_seed(row: Mapping[str, Any]) -> bool:
    """A claims row that is a seed-averaged claim's single-seed twin (``<claim>@seed<k>``: one seed's ``seeds``)."""
    seeds = row.get("seeds")
    return isinstance(seeds, str) and seeds.startswith("seed ")


def decided_in(family: object, hypotheses: object) -> str:
    """The family that decided a claim and its size, ``H2 (10 hypotheses)``; a gate's or pin's family alone."""
    family = "" if family is None or (isinstance(family, float) and math.isnan(family)) else str(family)
    try:
        size = int(hypotheses)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return family
    return f"{family} ({size} hypotheses)"


def same_numbers_elsewhere(rows: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Claim -> a claim of another family with the same numbers (``SAME_NUMBERS``) and another verdict.

    A user's ranker that reproduces a study ranker's outcomes measures the same effect on the same directions, yet
    its own two-claim family can decide what the study's ten-claim family leaves open: the report says so beside
    each such claim (``reports.render.equal_numbers_note``)."""
    measured = [r for r in rows if all(k in r for k in SAME_NUMBERS) and _finite(r["effect"])]
    out: dict[str, Mapping[str, Any]] = {}
    for row in measured:
        other = next((o for o in measured if o["family"] != row["family"] and o["status"] != row["status"]
                      and all(o[k] == row[k] for k in SAME_NUMBERS)), None)
        if other is not None:
            out[str(row["claim"])] = other
    return out


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(float(value))


def family_name(family: str, ranker: str, builtin: bool) -> str:
    """A claim's family: the study's own (``H2``) for the shipped profiles' rankers, else one per ranker."""
    return family if builtin else f"{family}:{ranker}"


def same_scorer(a: RankerDecl, b: RankerDecl) -> bool:
    """Two window declarations that read the same judgments: kind and options alike except the grade rule."""
    return a.kind == b.kind and a.scorer_options == b.scorer_options


def h2_claims(rankers: Sequence[RankerDecl], builtin_rankers: frozenset[str]) -> dict[str, tuple[str, str, str]]:
    """H2: every window ranker and every full-pool ranker not in ``builtin_rankers`` vs its baseline (``compare_to``)
    -> (ranker, versus, measure)."""
    out: dict[str, tuple[str, str, str]] = {}
    for decl in rankers:
        if not decl.is_window and decl.name in builtin_rankers:
            continue
        if decl.baseline and decl.baseline != decl.name:
            out[f"h2_{decl.name}_strict_gt_{decl.baseline}"] = (decl.name, decl.baseline, "strict")
            if not decl.designated_only:
                out[f"h2_{decl.name}_mrr_gt_{decl.baseline}"] = (decl.name, decl.baseline, "mrr")
    return out


def h3_claims(windows: Sequence[RankerDecl]) -> dict[str, str]:
    """H3: every argmax window ranker on a bounded grade scale -> its name."""
    return {f"h3_{d.name}_tie_branch_concentrates_failures": d.name for d in windows
            if d.max_score is not None and d.reading != "expected"}


def tie_twins(windows: Sequence[RankerDecl]) -> dict[str, tuple[str, str]]:
    """H3x: each expected-grade ranker and its argmax twin on the same directions -> (expected, argmax).

    The twin shares scorer, population, mode, reference and tie-breaker, so the two differ
    only in how a judgment becomes a score.
    """
    out: dict[str, tuple[str, str]] = {}
    for d in windows:
        if d.reading != "expected":
            continue
        for t in windows:
            if (t.reading != "expected" and same_scorer(d, t) and t.population == d.population
                    and t.mode == d.mode and t.reference == d.reference and t.tie_breaker == d.tie_breaker):
                out[f"h3_{d.name}_resolves_ties_of_{t.name}"] = (d.name, t.name)
                break
    return out


def designated_twins(windows: Sequence[RankerDecl]) -> dict[str, tuple[str, str]]:
    """Each designated-pair ranker and a fully windowed twin (same scorer and grade rule): id -> (designated, window).

    Only for kinds whose designated outcomes equal the window's (pointwise judges); a pairwise or listwise
    judgment of the pair alone is another measurement than the pair's order in the judged window.
    """
    out: dict[str, tuple[str, str]] = {}
    for d in windows:
        if not d.designated_only or not d.ranker_kind.pointwise:
            continue
        for w in windows:
            if (not w.designated_only and same_scorer(d, w) and d.reading == w.reading
                    and w.reference == d.reference and w.tie_breaker == d.tie_breaker):
                out[f"{d.name}-vs-{w.name}"] = (d.name, w.name)
    return out


@dataclass(frozen=True)
class DeclaredComparison:
    """A comparison claim as a profile declares it (H1 and any a user adds)."""

    name: str
    family: str
    ranker: str
    versus: str
    measure: str
    side: Side
    builtin: bool


def claim_definitions(comparisons: Sequence[DeclaredComparison], rankers: Sequence[RankerDecl],
                      builtin_rankers: frozenset[str]) -> dict[str, ClaimDefinition]:
    """Every claim the declarations imply, by name, each in its family (see the module doc)."""
    windows = [d for d in rankers if d.is_window]
    out: dict[str, ClaimDefinition] = {}
    for c in comparisons:
        paired_measure(c.measure)  # an unknown measure is an error here, before any work
        out[c.name] = ClaimDefinition(c.name, family_name(c.family or "declared", c.ranker, c.builtin),
                                      "comparison", c.ranker, c.versus, c.measure, c.side)
    for name, (ranker, versus, measure) in h2_claims(rankers, builtin_rankers).items():
        out[name] = ClaimDefinition(name, family_name("H2", ranker, ranker in builtin_rankers), "comparison", ranker,
                                    versus, measure)
    for name, ranker in h3_claims(windows).items():
        out[name] = ClaimDefinition(name, family_name("H3", ranker, ranker in builtin_rankers), "tie_branch", ranker,
                                    measure="tie_branch_share")
    for name, (expected, argmax) in tie_twins(windows).items():
        out[name] = ClaimDefinition(name, family_name("H3x", expected, expected in builtin_rankers),
                                    "tie_resolution", expected, argmax, "strict")
    return out
