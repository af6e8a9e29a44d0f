"""The evaluation as a library: ``evaluate`` computes a run into a typed ``RunRecord``; ``publish`` writes it.

    >>> from harness.run import evaluate, publish
    >>> record = evaluate("examples/my_reranker.toml", splits=["test"], subset_pairs=24, grader_sample=4)
    >>> record.table2[["split", "ranker", "n", "strict_pct", "mrr", "delta_pts"]]   # Table II of every split
    >>> record.failing("test", "my_reranker").head()       # the directions it does not strictly prefer
    >>> record.claims[["claim", "status", "measured"]]     # every claim with its verdict and test
    >>> publish(record, "results")                         # the published files, the explorer, the history

A run is a set of *parts* (``harness.parts``): one table's rows for one split and one declared
parameter (a ranker, a claim, a population). ``RunBuilder`` plans them from the profile
(``parameters``: the same lists the specs are parametrized over), computes each once on demand
into one ``RecordBuilder`` and keeps what failed, what did not apply and why. ``evaluate`` computes
every part; a pytest session computes those its specs ask for (``conftest.py``), and the specs
assert over what they computed. A run is complete when every planned part was computed (or failed,
or did not apply, with its reason); what is missing makes it partial (docs/protocol.md#publishing).
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from fixtures import progress
from fixtures.settings import SPLITS, Settings
from harness.checks import Check, enforce
from harness.claims import ClaimBook, check_claim_names, designated_twins, h2_claims, h3_claims, same_scorer, tie_twins
from harness.options import (OPTIONS, OptionError, fit_to_data, needed, resolve_before_work, settings_from,
                             use_pythonpath)
from harness.parts import PARTS, WITH_BOOK, NotApplicable, Part
from harness.profile import load_profile
from harness.profile_records import Profile
from harness.session import Evaluation
from rankers.declarations import RankerDecl
from reports.record import FAILURE_COLUMNS, NotEvaluated, RecordBuilder, RunRecord, SessionEnd

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


@dataclass(frozen=True)
class Outcome:
    """What computing a part gave: the checks its verdicts imply, or the error it failed with, or why it did not
    apply (``skipped``)."""

    checks: tuple[Check, ...] = ()
    error: BaseException | None = None
    skipped: str | None = None


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


class RunBuilder:
    """A run's parts, each computed once into one record; what failed or did not apply is kept with its reason.

    ``selected`` says which rankers this run computes (pytest's ``-m``, ``evaluate``'s ``rankers``): a part that
    needs another is not computed and leaves the run partial. A part needing a ranker this machine cannot run
    (its kind's requirements) is skipped with the reason; the run is still complete.
    """

    def __init__(self, ev: Evaluation, record: RecordBuilder | None = None,
                 selected: Callable[[RankerDecl], bool] = lambda decl: True) -> None:
        self.ev = ev
        self.record = record if record is not None else RecordBuilder()
        self.params = parameters(ev.profile, ev.settings)
        self.calls = {call.key: call for call in plan(ev.profile, ev.settings, self.params)}
        self.done: dict[tuple[str, str, str], Outcome] = {}
        self._unmet: dict[str, tuple[str, ...]] = {}
        self.selected = selected
        self.deselected = {key for key, call in self.calls.items()
                           if call.param is not None and not all(selected(d) for d in call.param.decls)}
        claims = set()
        for key, call in self.calls.items():
            if call.part.parameter in CLAIM_PARAMETERS and key not in self.deselected and not self.unmet(call):
                name = call.param.value
                claims.add((call.split, next(n for n, r in h3_claims(ev.profile).items() if r == name)
                            if call.part.parameter == "graded_ranker" else name))
        self.book: ClaimBook = ev.shared(("claim-book",), lambda: ClaimBook(ev, frozenset(claims)))

    def unmet(self, call: PartCall) -> tuple[str, ...]:
        """Why this machine cannot run a ranker the part computes (empty: it can), each ranker checked once."""
        reasons: list[str] = []
        for decl in needed(self.ev.profile, call.param.decls if call.param is not None else ()):
            if decl.name not in self._unmet:
                self._unmet[decl.name] = tuple(r.reason for r in decl.requirements() if not r.met())
            reasons += self._unmet[decl.name]
        return tuple(sorted(set(reasons)))

    def compute(self, part: str, split: str, value: Any = None) -> Outcome:
        """The outcome of the part for ``value`` of its parameter (None: a part of the split alone), computed on
        first use."""
        params = self.params.get(next((p.parameter for p in PARTS if p.name == part and p.parameter), ""), [])
        param_id = next((p.id for p in params if p.value == value), "") if value is not None else ""
        call = self.calls.get((part, split, param_id))
        if call is None:
            raise KeyError(f"no part {part}[{split}{'' if value is None else f'-{value}'}] in this run's plan "
                           f"(profile {self.ev.profile.path})")
        return self._compute(call)

    def _compute(self, call: PartCall) -> Outcome:
        """The call's outcome, computed once; its stage timings go to its split's manifest."""
        if call.key in self.done:
            return self.done[call.key]
        reasons = self.unmet(call)
        if reasons:
            names = ", ".join(d.name for d in needed(self.ev.profile, call.param.decls))
            outcome = Outcome(skipped=f"{names}: {'; '.join(reasons)}")
        else:
            args = {} if call.param is None else {call.part.parameter: call.param.value}
            if call.part.name in WITH_BOOK:
                args["book"] = self.book
            try:
                outcome = Outcome(checks=tuple(call.part.compute(self.ev, self.record, call.split, **args) or ()))
            except NotApplicable as exc:
                outcome = Outcome(skipped=str(exc))
            except Exception as exc:  # noqa: BLE001 - a part's failure costs its own rows only; kept with its cause
                outcome = Outcome(error=exc)
            self.drain_stages((call.split,))
        self.done[call.key] = outcome
        return outcome

    def drain_stages(self, splits: Iterable[str]) -> None:
        """The stages finished since the last call, into each split's manifest (``stages_wall_clock``)."""
        for stage in self.ev.clock.drain():
            row = {**{k: v for k, v in stage.items() if k != "split"}, "stage": f"{stage['stage']} ({stage['split']})"}
            for split in splits:  # Train/development stages belong to every evaluated split's manifest
                self.record.stage(split, row)

    def compute_all(self) -> None:
        """Every part of the plan that this run selects, in plan order, each named as it starts."""
        todo = [call for key, call in self.calls.items() if key not in self.deselected and key not in self.done]
        for i, call in enumerate(todo, 1):
            progress.note(f"part {i}/{len(todo)}: {call.name}")
            self._compute(call)

    def gaps(self) -> list[str]:
        """Why the run is partial: parts it did not compute (deselected rankers, or never asked for)."""
        for key, call in self.calls.items():  # what this machine cannot run is accounted for, with its reason
            if key not in self.done and key not in self.deselected and self.unmet(call):
                self._compute(call)
        gaps = []
        left_out = [call for key, call in self.calls.items() if key in self.deselected and key not in self.done]
        if left_out:
            rankers = sorted({d.name for call in left_out for d in call.param.decls if not self.selected(d)})
            gaps.append(f"{len(left_out)} part(s) need rankers this run does not compute (a -m selection or "
                        f"evaluate()'s rankers): {rankers}")
        missing = [call.name for key, call in self.calls.items() if key not in self.done and key not in self.deselected]
        if missing:
            gaps.append(f"{len(missing)} part(s) of the run not computed (a -k selection, specs picked by path, or a "
                        f"run stopped early): {', '.join(missing[:8])}{' …' if len(missing) > 8 else ''}")
        return gaps

    def failures(self) -> pd.DataFrame:
        """One row per part that failed or did not apply: split, part, ranker(s), outcome and cause."""
        rows = [{"split": call.split, "part": call.part.name, "ranker": ",".join(call.rankers),
                 "outcome": "failed" if outcome.error is not None else "skipped",
                 "cause": (f"{type(outcome.error).__name__}: {outcome.error}" if outcome.error is not None
                           else outcome.skipped)}
                for key, outcome in self.done.items() if (call := self.calls[key])
                and (outcome.error is not None or outcome.skipped is not None)]
        return pd.DataFrame(rows, columns=list(FAILURE_COLUMNS))

    def result(self) -> RunRecord:
        """The run as computed so far: its splits' records, what was not evaluated and why it is partial."""
        records = self.record.records()
        failures = self.failures()
        not_evaluated = {split: tuple(NotEvaluated(f"{row.part}[{row.ranker or split}]", row.outcome, row.cause)
                                      for row in failures[failures["split"] == split].itertuples())
                         for split in records}
        return RunRecord(records, not_evaluated, tuple(self.gaps()), failures)


def settle(outcome: Outcome) -> None:
    """A part's outcome as a spec's pytest outcome: its error raised again, its reason skipped, its checks
    enforced (``harness.checks.enforce``)."""
    if outcome.error is not None:
        raise outcome.error
    if outcome.skipped is not None:
        pytest.skip(outcome.skipped)
    enforce(outcome.checks)


def settings_for(profile: str | os.PathLike[str], **options: Any) -> Settings:
    """The run's settings from keyword arguments named like the command-line options (``splits`` may be a list),
    checked as the command line's are (``OptionError`` naming every bad one)."""
    defaults = {flag.lstrip("-").replace("-", "_"): kwargs.get("default") for flag, kwargs in OPTIONS}
    unknown = sorted(set(options) - set(defaults))
    if unknown:
        raise TypeError(f"unknown option(s) {unknown}; known: {sorted(set(defaults) - {'profile'})}")
    values = {**defaults, **{k: v for k, v in options.items() if v is not None}, "profile": str(profile)}
    if not isinstance(values["splits"], str):
        values["splits"] = ",".join(values["splits"])
    return settings_from(values.__getitem__)


def evaluate(profile: str | os.PathLike[str] = "embedded", *, rankers: Iterable[str] | None = None,
             **options: Any) -> RunRecord:
    """Evaluate a profile (a shipped one by name, or a path to a TOML that may extend one) and return its record.

    ``options`` are the command line's (``splits``, ``subset_pairs``, ``subset_seed``, ``grader_sample``,
    ``results_dir``, ``cache_dir``, ``data_dir``, ``compare_to``, ``gate_expectations``, ``max_judge_minutes``);
    ``rankers`` computes only those rankers (and what they read; the record is then partial). Everything the run
    loads is resolved before any work, and every expensive value is cached, so a second call is quick. Nothing is
    written to the results folder: ``publish`` does that.
    """
    settings = settings_for(profile, **options)
    loaded = load_profile(settings.profile, SPLITS)
    settings = fit_to_data(settings, loaded)
    check_claim_names(loaded)
    chosen = None if rankers is None else set(rankers)
    if chosen is not None and chosen - set(loaded.rankers):
        raise OptionError(f"rankers {sorted(chosen - set(loaded.rankers))} are not declared in {loaded.path} "
                          f"(declared: {sorted(loaded.rankers)})")
    selected = (lambda decl: True) if chosen is None else (lambda decl: decl.name in chosen)
    use_pythonpath(loaded)
    resolve_before_work(settings, loaded, selected)
    builder = RunBuilder(Evaluation(settings, loaded), selected=selected)
    builder.compute_all()
    return builder.result()


def publish(record: RunRecord, results_dir: str | os.PathLike[str] | None = None, *, compare_to: str | None = None,
            cache_dir: str | os.PathLike[str] | None = None) -> SessionEnd:
    """Write a run's files (docs/protocol.md#outputs) into ``results_dir`` (default: the record's own) as one
    transaction, keep it in the history, and compare it with a saved run (``compare_to``); returns where each
    split went (``published``), its history id (``saved``) and anything that went wrong."""
    from reports.writer import publish_run  # figures and the explorer load only when publishing

    settings = next(iter(record.splits.values())).entries.get("settings", {}) if record.splits else {}
    target = Path(results_dir or settings.get("results_dir") or "results").expanduser().resolve()
    cache = Path(cache_dir or settings.get("cache_dir") or Settings().cache_dir).expanduser()
    end = publish_run(record, target, compare_run=compare_to, figure_cache=cache / "figures")
    if end.failed or end.errors:
        raise RuntimeError("; ".join(end.failed + end.errors))
    return end
