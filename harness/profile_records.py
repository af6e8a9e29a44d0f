"""What a profile declares, as records: samples and their budgets, claims and their expectations, pins,
gates, and the profile itself (read by ``harness.profile.load_profile``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fixtures.datasets.pairs import DataDecl
from harness.profile_terms import QUALITY_GATES
from rankers.declarations import RankerDecl


class ProfileError(ValueError):
    """A profile cannot be read or is malformed; the message names the file, the table and the key."""


@dataclass(frozen=True)
class Budget:
    """What a sequential sample may spend per split; None: no limit of that kind (``max_directions`` always set)."""

    max_directions: int
    judgments: int | None = None
    tokens: int | None = None
    seconds: float | None = None

    def describe(self) -> str:
        parts = [f"{self.max_directions} directions"]
        parts += [f"{v:g} {k}" for k, v in (("judgments", self.judgments), ("tokens", self.tokens),
                                             ("seconds", self.seconds)) if v is not None]
        return ", ".join(parts)


@dataclass(frozen=True)
class Sample:
    """A seeded sample per split; a size of 0 means every eligible direction.

    ``directions`` holds the size on each evaluable split (one number in the profile, or one per split: a
    replication split may be sampled smaller than Test); ``size_on`` reads it.

    ``design`` is what it draws (``fixtures.samples.DESIGNS``): whole source groups, complete pairs or single
    directions (docs/statistics.md#designs).

    A ``sequential`` sample draws its groups in the same seeded order, ``batch`` groups at a time,
    until every claim of its rankers is decided or its ``budget`` is spent
    (docs/statistics.md#sequential-samples); ``directions`` is then the fixed design it is compared with.
    """

    name: str
    directions: tuple[tuple[str, int], ...]
    seed: int | None = None
    description: str = ""
    sequential: bool = False
    batch: int = 0
    budget: Budget | None = None
    design: str = "groups"

    def size_on(self, split: str) -> int:
        """The sample's directions on ``split`` (0: every eligible direction)."""
        return dict(self.directions)[split]


@dataclass(frozen=True)
class Expectation:
    """A reviewed verdict, the kind of run it was reviewed on and the file of the extends chain that wrote it."""

    expect: str  # holds | fails
    declared_in: Path
    reason: str = ""
    #: ``full`` (``expect``) or ``subset`` (``subset_expect``, reviewed on a seeded subset run).
    scope: str = "full"


@dataclass(frozen=True)
class Claim:
    """A claim's declaration: comparison details (H1-style claims) and its reviewed expectations."""

    name: str
    family: str = ""
    ranker: str = ""
    versus: str = ""
    measure: str = ""
    direction: str = ">"
    text: str = ""
    full: Expectation | None = None
    subset: Expectation | None = None

    @property
    def is_comparison(self) -> bool:
        return bool(self.ranker)

    def expectation(self, subset: bool) -> Expectation | None:
        """The expectation a run checks: on a subset run its ``subset_expect`` if reviewed, else its ``expect``
        (which a subset may contradict or leave undecided: docs/statistics.md#expectations)."""
        return (self.subset or self.full) if subset else self.full


@dataclass(frozen=True)
class Pin:
    """A reviewed value of one ranker's measure on one split, in one run scope, with its tolerance."""

    scope: str
    split: str
    ranker: str
    measure: str
    value: float
    tolerance: float
    declared_in: Path


@dataclass(frozen=True)
class Gate:
    """A CI limit on a measured value (``*_min`` / ``*_max``), profile-wide or for one ranker (docs/statistics.md#gates)."""

    key: str
    limit: float
    declared_in: Path
    ranker: str = ""  # "" for a profile-wide gate

    @property
    def table(self) -> str:
        return f"gates.{self.ranker}" if self.ranker else "gates"

    def passes(self, value: float) -> bool:
        return value >= self.limit if self.key.endswith("_min") else value <= self.limit


@dataclass(frozen=True)
class Profile:
    name: str
    path: Path
    description: str
    models: dict[str, str]
    samples: dict[str, Sample]
    rankers: dict[str, RankerDecl]
    claims: dict[str, Claim]
    gates: dict[str, Gate]
    pins: tuple[Pin, ...] = ()
    chain: tuple[Path, ...] = field(default_factory=tuple)
    #: Equivalence margin per paired measure (``[margins]``, in the measure's unit: points, MRR): within it, a
    #: run comparison or a pin can read "unchanged" (docs/statistics.md#tost).
    margins: dict[str, float] = field(default_factory=dict)
    #: Folders a ``python`` ranker's factory is looked up in first (``sys.path``), child profile's first.
    pythonpath: tuple[Path, ...] = ()
    #: ``[gates.<ranker>]``: each ranker's own gates by key.
    ranker_gates: dict[str, dict[str, Gate]] = field(default_factory=dict)
    #: ``[profile] inherit_checks``: inherited expectations, gates and pins fail this run too.
    inherit_checks: bool = False
    #: ``[data]``: the dataset the run evaluates (default NevIR).
    data: DataDecl = field(default_factory=DataDecl)
    #: ``[data] reference``: the dataset's own reference rows (``reports.paper.read_reference``: file and rows), what
    #: its report compares with instead of the NevIR paper; None when it declares none (docs/reference-results.md).
    reference: dict[str, Any] | None = None

    def declares(self, declared_in: Path) -> bool:
        """Whether this profile's own file wrote a check (else it inherits it from a file it extends)."""
        return declared_in == self.chain[-1]

    def enforces(self, declared_in: Path) -> bool:
        """Whether a check that is not met fails this run (docs/statistics.md#inherited-checks)."""
        return self.inherit_checks or self.declares(declared_in)

    def gate(self, key: str, ranker: str = "") -> Gate | None:
        """The gate on ``key`` for ``ranker``: its own ``[gates.<ranker>]`` value, else the profile-wide one."""
        return self.ranker_gates.get(ranker, {}).get(key) or self.gates.get(key)

    def gates_for(self, decl: RankerDecl) -> list[Gate]:
        """The gates on one ranker: a window ranker's fallback (its own limit, else the profile-wide one), then its
        quality gates."""
        fallback = self.gate("fallback_pct_max", decl.name) if decl.is_window else None
        own = [g for k, g in self.ranker_gates.get(decl.name, {}).items() if k in QUALITY_GATES]
        return ([fallback] if fallback is not None else []) + own

    def gated(self) -> list[RankerDecl]:
        """The rankers some gate applies to, in table order."""
        return [d for d in self.ordered() if self.gates_for(d)]

    def claim(self, name: str, split: str | None = None) -> Claim | None:
        """A claim's declaration; ``"<claim>@<split>"`` overrides it for one split; None when undeclared."""
        if split is not None and f"{name}@{split}" in self.claims:
            return self.claims[f"{name}@{split}"]
        return self.claims.get(name)

    def ordered(self) -> list[RankerDecl]:
        """Rankers in their table order (then by name)."""
        return sorted(self.rankers.values(), key=lambda d: (d.order, d.name))

    def sequential_sample(self, rankers: tuple[str, ...]) -> str | None:
        """The sequential sample any of ``rankers`` is evaluated on, or None (docs/statistics.md#sequential-samples)."""
        for name in rankers:
            decl = self.rankers.get(name)
            sample = None if decl is None else self.samples.get(decl.population)
            if sample is not None and sample.sequential:
                return sample.name
        return None

    def seeds(self, name: str, base_seed: int) -> tuple[int, ...]:
        """A ranker's training seeds, ``base_seed`` first; () for a ranker not trained with seeds
        (docs/statistics.md#seeds). Collection reads it before there is a session, the session after."""
        decl = self.rankers[name]
        return decl.ranker_kind.seeds(decl.options, base_seed)

    def window_rankers(self) -> list[RankerDecl]:
        return [d for d in self.ordered() if d.is_window]

    def comparisons(self) -> list[Claim]:
        return [c for c in self.claims.values() if c.is_comparison and "@" not in c.name]

