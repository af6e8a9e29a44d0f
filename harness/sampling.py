"""Which directions each ranker of the session is evaluated on: all eligible ones, or a declared sample of them.

``Sampling`` is the part of the session (``harness.session.Evaluation``) that draws a declaration's sample (seeded
whole source groups, docs/statistics.md#samples), runs a sequential sample look by look (``harness.sequential``)
and gives the view of the session one look of it sees.
"""
from __future__ import annotations

import copy
import dataclasses
from typing import Self

import pandas as pd

from fixtures.populations import annotate_population, eligible_directions
from fixtures.samples import group_order, group_sample, groups_for, sampling_units
from fixtures.settings import Settings
from fixtures.study import Study, _subset
from harness.memo import per_instance
from harness.sequential import SequentialRun, run_sequential
from harness.profile_records import Profile
from rankers.declarations import ALL


def nested_subset(study: Study, profile: Profile, settings: Settings) -> tuple[Study, dict[tuple[str, str], frozenset]]:
    """The subset study with every capped sample's draw taken from the full run's own (docs/statistics.md#samples),
    and those draws: (split, sample) -> the units it holds.

    A ``--subset-pairs`` run with ``--grader-sample N`` takes, for each fixed-size sample, the first units of the full
    run's seeded order (the prefix the full sample starts with), and adds their source groups to the subset, so the
    subset's sample lies inside the full run's and a run after command 1 judges nothing new. The full order needs the
    split's whole population, hence its whole pool: taken when it ships with the checkout (the embedded profile's
    pools, and any profile extending them), so the subset is the same on every machine and cache; for other pools
    the subset and its samples are drawn on their own, as before.
    """
    cap = settings.grader_sample
    if not settings.subset_pairs or not cap or not study.subset:
        return study, {}
    from fixtures.pools import frozen_snapshot, make_routes, snapshot_identity  # the shipped pools' manifests

    whole = dataclasses.replace(study, subset={})
    model = {role: None if str(profile.models.get(role, "")).startswith("builtin:") else profile.models.get(role) or None
             for role in ("dense", "sparse")}  # as the session names them (``Evaluation._model``)
    routes = make_routes(settings, model["dense"], model["sparse"])
    subset, nested = {split: list(pairs) for split, pairs in study.subset.items()}, {}
    for split in [s for s in settings.splits if s in study.subset]:
        fixed = {name: sample for name, sample in profile.samples.items()
                 if not sample.sequential and sample.size_on(split)}
        frozen = frozen_snapshot(split, snapshot_identity(whole, split, routes)) if fixed else None
        if frozen is None:
            continue
        directions = whole.split(split)
        eligible = eligible_directions(annotate_population(directions, frozen.frame))
        groups: set[str] = set()
        for name, sample in fixed.items():
            units = sampling_units(eligible, sample.design)
            seed = settings.seed if sample.seed is None else int(sample.seed)
            first = group_order(units, seed)[:min(groups_for(units, min(cap, sample.size_on(split))),
                                                  groups_for(units, sample.size_on(split)))]
            nested[(split, name)] = frozenset(first)
            groups |= set(directions.loc[directions["pair_id"].isin(units.loc[units["group"].astype(str).isin(first),
                                                                               "pair_id"]), "group"])
        taken = set(directions.loc[directions["group"].isin(groups), "pair_id"])
        # the sampled groups first, then the subset's own seeded order (a prefix of it) up to about as many pairs
        rest = _subset(whole.directions, max(1, settings.subset_pairs - len(taken)), settings.subset_seed)[split]
        subset[split] = sorted(taken | set(rest))
    return dataclasses.replace(study, subset=subset), nested


class Sampling:
    """The session's samples (mixed into ``Evaluation``, whose profile, settings and populations they read)."""

    def sample_size(self, name: str, split: str) -> int:
        """A sample's directions on ``split`` (0: every eligible direction): the profile's, or ``--grader-sample``'s
        cap on it (``--grader-sample 0``: no sampling at all)."""
        size, cap = self.profile.samples[name].size_on(split), self.settings.grader_sample
        if cap is None:
            return size
        if cap == 0 or size == 0:
            return cap
        return min(size, cap)

    def sample_seed(self, name: str) -> int:
        """A sample's seed: its own, else the run's."""
        seed = self.profile.samples[name].seed
        return self.settings.seed if seed is None else int(seed)

    def design(self, name: str) -> str:
        """What sample ``name`` draws (docs/statistics.md#designs). A subset run is itself a sample of whole source
        groups, so they stay its units whatever the design: a sample of its directions is a second stage of it."""
        return "groups" if self.is_subset else self.profile.samples[name].design

    def sample_units(self, split: str, name: str) -> pd.DataFrame:
        """The split's eligible directions (Q_c) with ``group`` holding the units sample ``name`` draws."""
        return sampling_units(eligible_directions(self.population(split)), self.design(name))

    @per_instance
    def sample(self, split: str, name: str) -> tuple[str, ...]:
        """A declared sample's qids: seeded whole source groups of Q_c, all eligible when its size is 0.

        Samples with the same seed are nested (a smaller one is a prefix of a larger one). A sequential
        sample holds the groups judged when it stopped (``sequential``).
        """
        if (split, name) in self._prefix:
            return self._prefix[(split, name)]
        if self.profile.samples[name].sequential:
            return self.sequential(split, name).qids
        if (split, name) in self.nested:  # a subset's sample: the full run's first units (``nested_subset``)
            units = sampling_units(eligible_directions(self.population(split)), self.profile.samples[name].design)
            return tuple(sorted(units.loc[units["group"].astype(str).isin(self.nested[(split, name)]), "qid"]))
        q = self.sample_units(split, name)
        size = self.sample_size(name, split)
        if not size:
            return tuple(sorted(q["qid"]))
        return tuple(group_sample(q, size, seed=self.sample_seed(name)))

    @per_instance
    def sequential(self, split: str, name: str) -> SequentialRun:
        """A sequential sample judged look by look until its claims are decided or its budget is spent."""
        return run_sequential(self, split, name)

    def prefix_view(self, split: str, name: str, qids: tuple[str, ...]) -> Self:
        """This session as it would be if sample ``name`` held ``qids`` on ``split``: one look of a sequential sample.

        The view shares the pools, populations, memo, caches and full-population rankings; what
        depends on the sample (its rankers' inputs, judgments, outcomes) is computed for the view.
        """
        view = copy.copy(self)
        view._prefix = {**self._prefix, (split, name): qids}
        view._snapshot, view.population = self._snapshot, self.population
        on_sample = {d.name for d in self.profile.rankers.values() if d.population == name}
        own_ranking, own_key = view.ranking, view.ranking_key
        view.ranking = lambda s, n: own_ranking(s, n) if s == split and n in on_sample else self.ranking(s, n)
        view.ranking_key = lambda s, n: own_key(s, n) if s == split and n in on_sample else self.ranking_key(s, n)
        view.context = dataclasses.replace(self.context, population=view.population, ranking=view.ranking,
                                           ranking_key=view.ranking_key)
        return view

    def directions_for(self, split: str, name: str) -> pd.DataFrame:
        """The annotated directions a ranker is evaluated on: all of the split, or its sample (``group`` holding the
        sample's units, which its intervals and tests resample)."""
        decl = self.decl(name)
        annotated = self.population(split)
        if decl.population == ALL:
            return annotated
        drawn = annotated[annotated["qid"].isin(self.sample(split, decl.population))].reset_index(drop=True)
        return sampling_units(drawn, self.design(decl.population))
