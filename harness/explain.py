"""What a run will compute, said before it computes anything: each stage, cached or to compute, and its estimate.

``pytest specs --explain`` (``conftest.py``) prints :func:`render` of :func:`explain` and exits 0 before any
work. A stage is named as the run's stage timings name it (``harness.stages``: ``pool``, ``train_cross_encoder``,
``rank_<ranker>``, ``score_<ranker>_<scope>``), and whether it is cached is read from the keys the run itself
looks up, never by computing a value:

- a split's pool: its snapshot in the cache, shipped in ``data/pools/`` (copied, seconds), or to retrieve
  (``fixtures.pools``);
- the trained cross-encoder: its model folder (``rankers.scorers.ce_training.plan_training``: the key without
  training), the budget a subset run would use included;
- a full-pool ranking: its memo file under the ranking's content key (``Evaluation.ranking_key``), keyed only when
  every pool it reads is already in the cache (keying a ranking reads its pools' digests);
- a window ranker's judging: when its reference ranking is memoized, the memo of its judgments (judge, inputs,
  score store generation; kept by a run that judged nothing), else the judge's plan of its inputs (``RankerKind.plan``
  or a pointwise scorer's ``plan_inputs``: judgments stored in the score store and to make), asked only of a scorer
  that needs no training first. Its window ranking itself then takes seconds.

An estimate for a stage to compute is the judge's plan (the score store's measured seconds per judgment) or else
the stage's wall-clock in the newest saved run of the same run scope on this machine (``results/.history``,
``manifest.json``'s ``stages_wall_clock``); without either it is unknown and says so. Claims, tables and
publishing are not listed: they are computed from the rankings (docs/benchmarks.md).
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from fixtures.identity import parts_digest, texts_digest
from fixtures.pools import PoolFileError, _cache_path, frozen_snapshot, make_routes, snapshot_identity
from fixtures.settings import Settings
from harness.options import needed
from harness.profile_records import Profile
from harness.space import route_model
from rankers.declarations import RankerDecl
from rankers.kinds.base import score_store
from reports.history import HISTORY, HistoryError, open_saved, saved_runs

CACHED, SHIPPED, TO_COMPUTE = "cached", "shipped", "to compute"


@dataclass(frozen=True)
class PlannedStage:
    """One stage of the run as planned: where it stands and what it should cost."""

    split: str
    stage: str
    state: str
    estimate_s: float | None = None
    basis: str = ""
    #: Inputs a scoring stage judges (0: not a scoring stage, or not known before its reference is ranked).
    inputs: int = 0


class _NotCached(Exception):
    """A memo lookup found no value: explaining computes none."""


def _missing() -> Any:
    raise _NotCached


#: Documented costs of a first run, where this machine has measured nothing yet: the cross-encoder's fine-tuning
#: on a quiet 2-core machine, by budget (docs/benchmarks.md: 4.5 min full; the CI budget's "minute or two" of
#: ``ce_recipe.BUDGETS``, 5.1 min measured beside other work, docs/benchmarks.md#the-ci-subset-and-the-cross-encoder).
DOCUMENTED_S = {("train_cross_encoder", "full budget"): 270.0, ("train_cross_encoder", "ci budget"): 90.0}


def contention(load: float | None = None, cores: int | None = None) -> float:
    """How many times slower than on quiet cores a CPU-bound stage runs now: the run queue per usable core (the
    1-minute load average over the cores this process may use), at least 1. A documented cost was measured on quiet
    cores; the own-data fine-tuning priced at 4.5 min took 12.6 at load 5-8 on 2 cores (docs/benchmarks.md)."""
    if load is None:
        try:
            load = os.getloadavg()[0]
        except OSError:  # no load average on this platform: priced as quiet
            return 1.0
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1.0, float(load) / max(cores, 1))


def measured_stages(settings: Settings) -> dict[tuple[str, str], float]:
    """(split, stage) -> seconds it took in the newest saved run of this run scope that computed it: nested stages
    included; a scoring stage's per judgment made (one whose judgments were all cached measured nothing)."""
    out: dict[tuple[str, str], float] = {}
    for run in reversed(saved_runs(settings.results_dir)):
        for split in settings.splits:
            try:
                manifest = open_saved(settings.results_dir / HISTORY / run, split).manifest
            except HistoryError:
                continue
            if manifest.get("scope") != settings.run_scope():
                continue
            for stage, record in (manifest.get("stages_wall_clock") or {}).items():
                if not isinstance(record, Mapping) or (split, stage) in out:
                    continue
                seconds = record.get("with_nested_s", record.get("seconds"))
                made = record.get("scored_now")
                if not isinstance(seconds, (int, float)) or (made is not None and not made):
                    continue  # a stage that read everything from the cache says nothing of its cost
                out[(split, stage)] = float(seconds) / made if made else float(seconds)
    return out


def explain(settings: Settings, profile: Profile, selected: Callable[[RankerDecl], bool] = lambda decl: True,
            evaluation: Any = None) -> list[PlannedStage]:
    """The stages a run of ``profile`` under ``settings`` will run, each cached or to compute, with its estimate
    (``evaluation``: the run's own session, which ``evaluate()`` hands over with the objects added to it)."""
    from harness.session import Evaluation  # the run's own keys, built lazily: nothing is computed here

    evaluation = evaluation if evaluation is not None else Evaluation(settings, profile, contact=False)
    measured = measured_stages(settings)
    stages = _stages(evaluation, [d for d in needed(profile, (d for d in profile.ordered() if selected(d)))
                                  if all(r.met() for r in d.requirements())])
    slower = contention()
    return [_estimated(s, measured, slower) for s in stages]


def _estimated(stage: PlannedStage, measured: Mapping[tuple[str, str], float], slower: float = 1.0) -> PlannedStage:
    """A stage to compute without its own estimate, estimated from its last run here or the documented cost (a quiet
    machine's, times ``slower``: this machine's ``contention`` now)."""
    if stage.state != TO_COMPUTE or stage.estimate_s is not None:
        return stage
    rate = measured.get((stage.split, stage.stage))
    if rate is not None and stage.inputs and stage.stage.startswith("score_"):
        return replace(stage, estimate_s=rate * stage.inputs, basis=f"{stage.basis}; {rate:.3g} s each in its last "
                                                                    "run here")
    if rate is not None and not stage.stage.startswith("score_"):
        return replace(stage, estimate_s=rate, basis=f"{stage.basis}; its last run here".lstrip("; "))
    documented = DOCUMENTED_S.get((stage.stage, stage.basis))
    if documented is not None:
        busy = f", x{slower:.1f} for this machine's load" if slower > 1 else ""
        return replace(stage, estimate_s=documented * slower,
                       basis=f"{stage.basis}; documented, quiet 2 cores{busy}")
    return stage


def _pool_state(evaluation: Any, split: str) -> PlannedStage:
    """Whether the split's pool snapshot is in the cache, shipped with the checkout (or a subset's rows of a whole
    pool that is: taken, seconds), or to retrieve; a shipped snapshot the run would refuse says why."""
    settings, study, profile = evaluation.settings, evaluation.study, evaluation.profile
    routes = make_routes(settings, route_model(profile, "dense"), route_model(profile, "sparse"))
    identity = snapshot_identity(study, split, routes)
    if _cache_path(settings, split, identity).exists():
        return PlannedStage(split, "pool", CACHED)
    subset = split in study.subset  # a subset's pool is its queries' rows of the split's whole pool
    whole = snapshot_identity(replace(study, subset={}), split, routes) if subset else identity
    try:
        shipped = (subset and _cache_path(settings, split, whole).exists()) or frozen_snapshot(split, whole) is not None
    except PoolFileError as exc:  # the run itself stops on it, naming the file
        return PlannedStage(split, "pool", TO_COMPUTE, basis=f"the shipped snapshot is refused: {exc}")
    return PlannedStage(split, "pool", SHIPPED if shipped else TO_COMPUTE)


def _stages(evaluation: Any, decls: list[RankerDecl]) -> Iterator[PlannedStage]:
    splits = tuple(evaluation.settings.splits)
    trained = [s for d in decls for s in d.ranker_kind.trains_on(d.options)]
    pools = [_pool_state(evaluation, s) for s in dict.fromkeys(trained + list(splits))]
    yield from pools
    # Keying a ranking reads its pools' digests: a cached pool's, or a shipped one's once copied into the cache.
    keyed = all(pool.state in (CACHED, SHIPPED) for pool in pools)
    for decl in (d for d in decls if hasattr(d.ranker_kind, "trained_state")):
        stage = _trained_model(evaluation, decl, keyed)
        if stage is not None:  # the trained model is one per run, shared by the declarations that read it
            yield stage
            break
    judged: dict[str, str] = {}  # a judging stage's key -> the stage that judges it (later ones read its judgments)
    for split in splits:
        for decl in decls:
            if decl.is_window:
                yield _judging(evaluation, split, decl, keyed, judged)
            elif not decl.designated_only:
                yield _ranking(evaluation, split, decl, keyed)


def _trained_model(evaluation: Any, decl: RankerDecl, keyed: bool) -> PlannedStage | None:
    """The trained model's stage (None: the declaration trains none): its key read from its training inputs (its own
    dataset's pools when they are in the cache, NevIR's shipped ones for ``train_on = "nevir"``)."""
    if not keyed and decl.ranker_kind.trains_on(decl.options):  # no model of pools not yet in the cache either
        budget = "ci" if evaluation.is_subset else "full"
        return PlannedStage("train", "train_cross_encoder", TO_COMPUTE, basis=f"{budget} budget")
    state = decl.ranker_kind.trained_state(decl, evaluation.context)
    if state is None:
        return None
    if state.shipped:  # its judgments of the study ship with the checkout: nothing is trained
        return PlannedStage("train", "train_cross_encoder", SHIPPED, basis="its judgments ship in data/reference/")
    return PlannedStage("train", "train_cross_encoder", CACHED if state.cached else TO_COMPUTE,
                        basis=f"{state.budget} budget")


def _memoized(evaluation: Any, label: str, key: Any) -> bool:
    return key is not None and evaluation.memo.path(label, key).exists()


def _ranking(evaluation: Any, split: str, decl: RankerDecl, keyed: bool) -> PlannedStage:
    stage = f"rank_{decl.name}"
    if not keyed:
        return PlannedStage(split, stage, TO_COMPUTE)
    key = evaluation.ranking_key(split, decl.name)
    return PlannedStage(split, stage, CACHED if _memoized(evaluation, "ranking", key) else TO_COMPUTE,
                        basis="" if key is not None else "not memoized (your code runs every time)")


def _judging(evaluation: Any, split: str, decl: RankerDecl, keyed: bool, judged: dict[str, str]) -> PlannedStage:
    """A window ranker's judging stage: cached when its judgments' memo is there or an earlier stage of the run makes
    the same judgments (``judged``), else the judge's plan."""
    scope = "pair" if decl.designated_only else "window"
    stage = f"score_{decl.name}_{scope}"
    if not keyed:  # its inputs are read from the pools (the designated pairs of the covered directions)
        return PlannedStage(split, stage, TO_COMPUTE, basis="after the pools")
    reference = evaluation.ranking_key(split, decl.reference) if decl.reference else None
    if scope == "window" and not _memoized(evaluation, "ranking", reference):
        return PlannedStage(split, stage, TO_COMPUTE, basis=f"after {decl.reference}'s ranking")
    try:
        if scope == "window":
            evaluation.memo.get("ranking", reference, _missing)  # read, verified: its window is what is judged
    except _NotCached:  # a memo file that does not verify is recomputed by the run
        return PlannedStage(split, stage, TO_COMPUTE, basis=f"after {decl.reference}'s ranking")
    inputs = evaluation.inputs(split, decl.name, scope)
    ctx = evaluation.context
    identity = decl.ranker_kind.identity(decl, ctx)
    parts = {"judge": identity, "scope": scope, "inputs": texts_digest(inputs),
             "store": score_store(ctx).generation()}
    if _memoized(evaluation, "judgments", parts):
        return PlannedStage(split, stage, CACHED, basis=f"{len(inputs):,} inputs", inputs=len(inputs))
    judge = decl.ranker_kind.judge_key(decl, ctx)  # the score store's key: declarations sharing a judge share it
    same = parts_digest([judge, parts["inputs"]] if judge is not None else parts)
    if same in judged:
        return PlannedStage(split, stage, CACHED, basis=f"the judgments of {judged[same]}")
    judged[same] = stage
    kind = decl.ranker_kind
    plan = kind.plan(decl, ctx, inputs)
    trained = getattr(kind, "trained_state", lambda decl, ctx: None)
    if plan is None and hasattr(kind, "plan_inputs") and (trained(decl, ctx) or (True,))[0]:
        plan = kind.plan_inputs(decl, ctx, inputs)  # the stored judgments of a scorer that needs no training first
    if plan is None:
        return PlannedStage(split, stage, TO_COMPUTE, basis=f"{len(inputs):,} inputs", inputs=len(inputs))
    state = CACHED if not plan.to_judge else TO_COMPUTE
    return PlannedStage(split, stage, state, plan.estimate_s,
                        f"{plan.to_judge:,} of {plan.judgments:,} judgments to make"
                        + (f" at {plan.seconds_per_judgment:.3g} s" if plan.seconds_per_judgment else ""),
                        inputs=plan.to_judge)


def over_limit(stages: list[PlannedStage], minutes: float) -> str | None:
    """Why a run stops before any work under ``--max-stage-minutes`` (None: no stage to compute is estimated above
    ``minutes``); a stage with no estimate cannot be held to the limit, and the message says so when it names others."""
    if not minutes > 0:
        return f"--max-stage-minutes must be > 0, got {minutes:g}"
    over = [s for s in stages if s.state == TO_COMPUTE and s.estimate_s is not None and s.estimate_s > 60 * minutes]
    if not over:
        return None
    unknown = sum(s.state == TO_COMPUTE and s.estimate_s is None for s in stages)
    named = "; ".join(f"{s.stage} ({s.split}) ~{s.estimate_s / 60:.1f} min [{s.basis}]" for s in over)
    return (f"--max-stage-minutes {minutes:g}: {len(over)} stage(s) to compute are estimated above it: {named}; "
            f"nothing was computed (--explain lists every stage"
            + (f"; {unknown} stage(s) to compute have no estimate and were not held to the limit)" if unknown else ")"))


def render(stages: list[PlannedStage]) -> str:
    """One line per stage, then the total of the estimates (and how many stages to compute have none)."""
    lines = ["what this run will compute (docs/benchmarks.md; nothing was computed):"]
    for s in stages:
        cost = "" if s.state != TO_COMPUTE else (f", ~{s.estimate_s / 60:.1f} min" if s.estimate_s is not None
                                                 else ", no measured rate here")
        lines.append(f"  {s.stage} ({s.split}): {s.state}{cost}" + (f" [{s.basis}]" if s.basis else ""))
    todo = [s for s in stages if s.state == TO_COMPUTE]
    known = sum(s.estimate_s for s in todo if s.estimate_s is not None)
    unknown = sum(s.estimate_s is None for s in todo)
    lines.append(f"  {len(todo)} of {len(stages)} stages to compute, ~{known / 60:.1f} min estimated"
                 + (f" plus {unknown} without a measured rate" if unknown else ""))
    return "\n".join(lines)
