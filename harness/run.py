"""The evaluation as a library: ``evaluate`` computes a run into a typed ``RunRecord``; ``publish`` writes it.

    >>> from harness.run import evaluate, publish
    >>> record = evaluate("examples/my_reranker.toml", splits=["test"], subset_pairs=24, grader_sample=4)
    >>> record.table2[["split", "ranker", "n", "strict_pct", "mrr", "delta_pts"]]   # Table II of every split
    >>> record.failing("test", "my_reranker").head()       # the directions it does not strictly prefer
    >>> record.claims[["claim", "status", "measured"]]     # every claim with its verdict and test
    >>> record.checks                                      # what the verdicts ask of the run (CI fails on "fail")
    >>> publish(record, "results")                         # the published files, the explorer, the history

A ranker enters as a profile declaration or as a Python object (``add={"mine": obj}``: an object with
``score(inputs)`` or ``score_pool``, a ``sentence_transformers.CrossEncoder``, a ``rerankers`` Reranker, a
FlagEmbedding reranker or a function ``f(query, passages)``: ``rankers.scorers.objects``). A run is a set of *parts*
(``harness.parts``): one table's rows for one split and one declared parameter (a ranker, a claim, a population).
``RunBuilder`` plans them from the profile (``parameters``: the same lists the specs are parametrized over),
computes each selected one once into one record and keeps what failed, what did not apply and why. This is the one
engine: ``evaluate`` computes every part; a pytest session computes the parts its collected specs name, once, before
the first spec runs (``conftest.py``), and the specs assert over the same ``RunRecord`` the report plugin publishes.
A run is complete when every planned part was computed (or did not apply, with its reason) and none failed; anything
else makes it partial (docs/protocol.md#publishing).

Importing this module pins the CPU kernel family before anything loads torch, as the command line does
(``fixtures.settings.pin_cpu_kernels``), so a notebook computes the same scores under the same keys.
"""
from __future__ import annotations

from fixtures.settings import pin_cpu_kernels

pin_cpu_kernels()  # before anything below loads torch: the same kernels, scores and keys as the command line

import os  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
from collections.abc import Callable, Iterable, Mapping, Sequence  # noqa: E402
from dataclasses import replace  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from fixtures import progress  # noqa: E402
from fixtures.settings import CPU_KERNELS, SPLITS, Settings  # noqa: E402
from harness.checks import subset_notice  # noqa: E402
from harness.claims import ClaimBook, check_claim_names, h3_claims  # noqa: E402
from harness.options import (OPTIONS, OptionError, fit_to_data, key_problem, needed,  # noqa: E402
                             resolve_before_work, settings_from, use_pythonpath)
from harness.parts import NotApplicable  # noqa: E402
from harness.planning import CLAIM_PARAMETERS, PARTS, WITH_BOOK, PartCall, parameters, plan  # noqa: E402
from harness.profile import load_profile  # noqa: E402
from harness.profile_records import Profile, ProfileError  # noqa: E402
from harness.session import Evaluation  # noqa: E402
from rankers.declarations import DeclarationError, RankerDecl, check_declarations, parse_declaration  # noqa: E402
from rankers.kinds.base import MARKS  # noqa: E402
from rankers.kinds.python import ADDED, added_declaration  # noqa: E402
from reports.record import SessionEnd  # noqa: E402
from reports.record_builder import RecordBuilder  # noqa: E402
from reports.run_record import PartKey, PartOutcome, RankerLost, RunRecord, part_name  # noqa: E402

class RunBuilder:
    """A run's parts, each computed once into one record; what failed or did not apply is kept with its cause.

    ``selected`` says which rankers this run computes (pytest's ``-m``, ``evaluate``'s ``rankers`` and
    ``exclude_marks``): a part that needs another is not computed and leaves the run partial. A part needing a
    ranker this machine cannot run (its kind's requirements) is skipped with the reason; the run is still complete.
    """

    def __init__(self, ev: Evaluation, selected: Callable[[RankerDecl], bool] = lambda decl: True) -> None:
        self.ev = ev
        self._record = RecordBuilder()
        self.params = parameters(ev.profile, ev.settings)
        self.calls = {call.key: call for call in plan(ev.profile, ev.settings, self.params)}
        self.done: dict[PartKey, PartOutcome] = {}
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

    def left_out(self, key: PartKey) -> tuple[str, ...]:
        """The rankers a part needs that this run does not compute (empty: the run selects them all), so a spec
        over it can say why it was not computed."""
        if key not in self.deselected:
            return ()
        return tuple(sorted({d.name for d in self.calls[key].param.decls if not self.selected(d)}))

    def unmet(self, call: PartCall) -> tuple[str, ...]:
        """Why this machine cannot run a ranker the part computes (empty: it can), each ranker checked once."""
        reasons: list[str] = []
        for decl in needed(self.ev.profile, call.param.decls if call.param is not None else ()):
            if decl.name not in self._unmet:
                self._unmet[decl.name] = tuple(r.reason for r in decl.requirements() if not r.met())
            reasons += [f"{decl.name}: {reason}" for reason in self._unmet[decl.name]]
        return tuple(dict.fromkeys(reasons))

    def key(self, part: str, split: str, value: Any = None) -> PartKey:
        """The planned part computing ``part`` on ``split`` for ``value`` of its parameter (None: a part of the split
        alone); ``KeyError`` naming it when the plan has none."""
        parameter = next((p.parameter for p in PARTS if p.name == part), None)
        param_id = next((p.id for p in self.params.get(parameter or "", []) if p.value == value), "") \
            if value is not None else ""
        if (part, split, param_id) not in self.calls:
            raise KeyError(f"no part {part}[{split}{'' if value is None else f'-{value}'}] in this run's plan "
                           f"(profile {self.ev.profile.path})")
        return part, split, param_id

    def _compute(self, call: PartCall) -> PartOutcome:
        """The call's outcome, computed once; its stage timings go to its split's manifest."""
        if call.key in self.done:
            return self.done[call.key]
        reasons = self.unmet(call)
        if reasons:
            outcome = PartOutcome(skipped="; ".join(reasons), rankers=call.rankers)
        else:
            args = {} if call.param is None else {call.part.parameter: call.param.value}
            if call.part.name in WITH_BOOK:
                args["book"] = self.book
            try:
                checks = call.part.compute(self.ev, self._record, call.split, **args) or ()
                outcome = PartOutcome(checks=tuple(checks), rankers=call.rankers)
            except NotApplicable as exc:
                outcome = PartOutcome(skipped=str(exc), rankers=call.rankers)
            except Exception as exc:  # noqa: BLE001 - a part's failure costs its own rows only; kept with its cause
                outcome = PartOutcome(error=exc, rankers=call.rankers)
            self.drain_stages((call.split,))
        self.done[call.key] = outcome
        return outcome

    def drain_stages(self, splits: Iterable[str]) -> None:
        """The stages finished since the last call, into each split's manifest (``stages_wall_clock``)."""
        for stage in self.ev.clock.drain():
            row = {**{k: v for k, v in stage.items() if k != "split"}, "stage": f"{stage['stage']} ({stage['split']})"}
            for split in splits:  # Train/development stages belong to every evaluated split's manifest
                self._record.stage(split, row)

    def run(self, keys: Iterable[PartKey] | None = None) -> RunRecord:
        """Compute the parts this run selects (``keys``: only those, e.g. the specs pytest collected; None: every
        part of the plan), in plan order, each named as it starts, and return the run's record. Parts this machine
        cannot run are accounted for with their reason either way."""
        wanted = None if keys is None else set(keys)
        unknown = sorted(wanted - set(self.calls)) if wanted is not None else []
        if unknown:
            raise KeyError(f"parts not in this run's plan: {[part_name(k) for k in unknown]}")
        todo = [call for key, call in self.calls.items() if key not in self.deselected and key not in self.done
                and (wanted is None or key in wanted or self.unmet(call))]
        for i, call in enumerate(todo, 1):
            progress.note(f"part {i}/{len(todo)}: {call.name}")
            self._compute(call)
        return self.result()

    def _partial(self) -> list[str]:
        """Why the run is not complete: parts that failed, parts it does not select, parts it did not compute."""
        reasons = []
        failed = [call.name for key, call in self.calls.items() if key in self.done and self.done[key].error]
        if failed:
            reasons.append(f"{len(failed)} part(s) failed (the report lists each cause): "
                           f"{', '.join(failed[:8])}{' …' if len(failed) > 8 else ''}")
        left_out = [call for key, call in self.calls.items() if key in self.deselected and key not in self.done]
        if left_out:
            rankers = sorted({d.name for call in left_out for d in call.param.decls if not self.selected(d)})
            reasons.append(f"{len(left_out)} part(s) need rankers this run does not compute (a -m selection or "
                           f"evaluate()'s rankers): {rankers}")
        missing = [call.name for key, call in self.calls.items() if key not in self.done and key not in self.deselected]
        if missing:
            reasons.append(f"{len(missing)} part(s) of the run not computed (a -k selection, specs picked by path, "
                           f"or a run stopped early): {', '.join(missing[:8])}{' …' if len(missing) > 8 else ''}")
        return reasons

    def result(self) -> RunRecord:
        """The run as computed so far: its splits' records, every part's outcome, and why it is partial."""
        return RunRecord(self._record.records(), {key: self.done[key] for key in self.calls if key in self.done},
                         tuple(self._partial()))


def settings_for(profile: str | os.PathLike[str], **options: Any) -> Settings:
    """The run's settings from keyword arguments named like the command-line options (``splits`` a list of names),
    checked as the command line's are (``OptionError`` naming every bad one)."""
    defaults = {flag.lstrip("-").replace("-", "_"): kwargs.get("default") for flag, kwargs in OPTIONS}
    unknown = sorted(set(options) - set(defaults))
    if unknown:
        raise OptionError(f"unknown option(s) {unknown}; known: {sorted(set(defaults) - {'profile'})}")
    values = {**defaults, **{k: v for k, v in options.items() if v is not None}, "profile": str(profile)}
    if not isinstance(values["splits"], str):
        values["splits"] = ",".join(_names("splits", values["splits"]))
    return settings_from(values.__getitem__)


def _names(option: str, value: Any) -> list[str]:
    """A list of names as a keyword argument must give it: a string there would be read letter by letter."""
    if isinstance(value, str) or not isinstance(value, Iterable) or not all(isinstance(v, str) for v in value):
        raise OptionError(f"{option} must be a list of names, e.g. {option}=[{value!r}], got {value!r} "
                          f"({type(value).__name__})")
    return list(value)


def _whole(option: str, value: Any, minimum: int) -> int | None:
    """A whole-number keyword argument (None: not set): ``24.5``, ``'24'`` or ``True`` is refused, not rounded."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise OptionError(f"{option} must be a whole number >= {minimum}, got {value!r} ({type(value).__name__})")
    return value


def _path(option: str, value: Any) -> str | os.PathLike[str] | None:
    """A folder or file keyword argument (None: not set): a path or a string, never a number or a list."""
    if value is not None and not isinstance(value, (str, os.PathLike)):
        raise OptionError(f"{option} must be a path (a str or pathlib.Path), got {value!r} ({type(value).__name__})")
    return value


def _minutes(option: str, value: Any) -> float | None:
    """A number of minutes (None: no limit): ``'5'`` or ``True`` is refused, not read."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise OptionError(f"{option} must be a number of minutes, got {value!r} ({type(value).__name__})")
    return value


def _flag(option: str, value: Any) -> bool:
    """A True/False keyword argument: ``'no'`` would be true, so anything but a bool is refused."""
    if not isinstance(value, bool):
        raise OptionError(f"{option} must be True or False, got {value!r} ({type(value).__name__})")
    return value


def with_added(profile: Profile, add: Mapping[str, object]) -> Profile:
    """The profile with rankers handed over as Python objects (``evaluate(add=...)``), each declared as a ``python``
    ranker would be in the profile (its H2 claims, Table II row and outputs follow), checked before any work."""
    if not isinstance(add, Mapping):
        raise OptionError(f"add must map ranker names to objects, e.g. add={{'mine': WordOverlap()}}, got "
                          f"{type(add).__name__}")
    rankers = dict(profile.rankers)
    for name, obj in add.items():
        where = f"evaluate(add={{{name!r}: {type(obj).__name__}(...)}})"
        if name in rankers:
            raise OptionError(f"{where}: the profile {profile.path} declares a ranker named {name!r} already")
        from rankers.scorers.python_scorer import ScorerDeclarationError, load_python_object  # user code's checks

        try:
            decl = parse_declaration(str(name), added_declaration(str(name), obj), where)
            load_python_object(obj, ranker=str(name))
        except (DeclarationError, ScorerDeclarationError) as exc:
            raise OptionError(str(exc)) from None
        rankers[name] = replace(decl, options={**decl.options, ADDED: name}, data=profile.data,
                                order=max(d.order for d in rankers.values()) + 1)
    try:
        check_declarations(rankers, profile.samples, str(profile.path))
    except (DeclarationError, ProfileError) as exc:
        raise OptionError(str(exc)) from None
    return replace(profile, rankers=rankers)


def kernel_problem() -> str | None:
    """Why this process cannot compute the pinned kernels' scores (None: it can): torch was loaded before this module
    pinned them, with another kernel family, so its scores could differ from the command line's under the same cache
    keys (docs/reproducibility.md). Checked without loading torch."""
    torch = sys.modules.get("torch")
    wanted = os.environ.get("ATEN_CPU_CAPABILITY") or CPU_KERNELS["ATEN_CPU_CAPABILITY"]
    if torch is None or platform.machine().lower() not in ("x86_64", "amd64"):
        return None
    try:
        running = str(torch.backends.cpu.get_cpu_capability())
    except (AttributeError, RuntimeError):
        return None
    if running.lower() == wanted.lower():
        return None
    return (f"torch was imported before harness.run and runs {running} kernels, not the pinned "
            f"ATEN_CPU_CAPABILITY={wanted}: its scores could differ from the command line's under the same cache "
            "keys; import harness.run first, before torch or anything that loads it (in a fresh kernel or interpreter)")


def evaluate(profile: str | os.PathLike[str] = "embedded", *, add: Mapping[str, object] | None = None,
             splits: Sequence[str] | None = None, subset_pairs: int | None = None, subset_seed: int = 0,
             grader_sample: int | None = None, rankers: Sequence[str] | None = None,
             exclude_marks: Sequence[str] = (), cache_dir: str | os.PathLike[str] | None = None,
             results_dir: str | os.PathLike[str] | None = None, data_dir: str | os.PathLike[str] | None = None,
             compare_to: str | None = None, gate_expectations: bool = False,
             max_judge_minutes: float | None = None, max_stage_minutes: float | None = None,
             retrain: bool = False) -> RunRecord:
    """Evaluate a profile (a shipped one by name, or a path to a TOML that may extend one) and return its record.

    ``add`` puts rankers in as Python objects beside the profile's (``{"mine": WordOverlap()}``: anything
    ``rankers.scorers.objects`` reads, a library's reranker or a function included); their scores are cached under
    their ``model_key`` (their own, or derived from their weights or code) like a ``python`` ranker's. The options
    are the command line's (README, "Options"); ``rankers`` computes only those rankers (and what they read),
    ``exclude_marks`` leaves out rankers declared with any of those marks (like ``-m "not llm"``); either makes the
    record partial. ``max_stage_minutes`` stops the run before any work when a stage it must compute is estimated
    above that many minutes (the ``--explain`` plan); ``retrain`` trains the study's models again instead of reading
    those the checkout ships (``--retrain``). Everything the run loads is resolved before any work, and every
    expensive value is cached, so a second call is quick. Nothing is written to the results folder: ``publish`` does
    that. Errors are ``OptionError`` naming the option, file or declaration; a ranker that failed in every part
    raises ``RankerLost`` with its first cause (the record on its ``record``).
    """
    problem = kernel_problem()
    if problem:
        raise OptionError(problem)
    if rankers is not None and not _names("rankers", rankers):
        raise OptionError("rankers=[] selects no ranker: name those to compute, or leave rankers out to compute every "
                          "declared ranker")
    if compare_to is not None and not isinstance(compare_to, str):
        raise OptionError(f"compare_to must be a saved run id or a results folder (a str), got {compare_to!r}")
    _minutes("max_stage_minutes", max_stage_minutes)
    settings = settings_for(
        _path("profile", profile), splits=None if splits is None else _names("splits", splits),
        subset_pairs=_whole("subset_pairs", subset_pairs, 1), subset_seed=_whole("subset_seed", subset_seed, 0),
        grader_sample=_whole("grader_sample", grader_sample, 0), cache_dir=_path("cache_dir", cache_dir),
        results_dir=_path("results_dir", results_dir), data_dir=_path("data_dir", data_dir), compare_to=compare_to,
        gate_expectations=_flag("gate_expectations", gate_expectations),
        max_judge_minutes=_minutes("max_judge_minutes", max_judge_minutes), retrain=_flag("retrain", retrain))
    try:
        loaded = load_profile(settings.profile, SPLITS)
    except ProfileError as exc:
        raise OptionError(str(exc)) from None
    if add:
        loaded = with_added(loaded, add)
    settings = fit_to_data(settings, loaded)
    check_claim_names(loaded)
    chosen = None if rankers is None else set(_names("rankers", rankers))
    if chosen is not None and chosen - set(loaded.rankers):
        raise OptionError(f"rankers {sorted(chosen - set(loaded.rankers))} are not declared in {loaded.path} "
                          f"(declared: {sorted(loaded.rankers)})")
    excluded = set(_names("exclude_marks", exclude_marks))
    if excluded - set(MARKS):
        raise OptionError(f"exclude_marks {sorted(excluded - set(MARKS))} are no ranker marks (marks: {list(MARKS)})")

    def selected(decl: RankerDecl) -> bool:
        return (chosen is None or decl.name in chosen) and not excluded & set(decl.marks)

    use_pythonpath(loaded)
    resolve_before_work(settings, loaded, selected)
    for line in subset_notice(settings, loaded):  # what this subset's gate cannot hold, said once before any work
        progress.note(line)
    ev = Evaluation(settings, loaded)
    for name, obj in (add or {}).items():
        from rankers.scorers.python_scorer import load_python_object  # user code: only when handed over

        ev.shared((ADDED, name), lambda obj=obj, name=name: load_python_object(obj, ranker=name))
    if max_stage_minutes is not None:  # a stage estimated above the limit stops the run before any work
        from harness.explain import explain, over_limit  # the plan reads keys only

        problem = over_limit(explain(settings, loaded, selected, ev), float(max_stage_minutes))
        if problem:
            raise OptionError(problem)
    record = RunBuilder(ev, selected=selected).run()
    lost = record.lost_rankers()
    if lost:  # a notebook never gets a record silently missing a ranker's row
        raise RankerLost(record, lost) from next(iter(lost.values()))[1].error
    return record


def publish(record: RunRecord, results_dir: str | os.PathLike[str] | None = None, *, compare_to: str | None = None,
            cache_dir: str | os.PathLike[str] | None = None) -> SessionEnd:
    """Write a run's files (docs/protocol.md#outputs) into ``results_dir`` (default: the record's own) as one
    transaction, keep it in the history, and compare it with a saved run (``compare_to``); returns where each
    split went (``published``), its history id (``saved``) and anything that went wrong. A record that is not
    complete goes to ``<results_dir>/partial/`` and never replaces a complete run's files. A bad argument, or a memo
    key that cannot seal the files, is an ``OptionError`` before anything is written."""
    from reports.writer import publish_run  # figures and the explorer load only when publishing

    if not isinstance(record, RunRecord):
        raise OptionError(f"publish takes the RunRecord evaluate() returned, got {record!r} ({type(record).__name__})")
    if compare_to is not None and not isinstance(compare_to, str):
        raise OptionError(f"compare_to must be a saved run id or a results folder (a str), got {compare_to!r}")
    settings = next(iter(record.splits.values())).entries.get("settings", {}) if record.splits else {}
    target = Path(_path("results_dir", results_dir) or settings.get("results_dir") or "results").expanduser().resolve()
    cache = Path(_path("cache_dir", cache_dir) or settings.get("cache_dir") or Settings().cache_dir).expanduser()
    problem = key_problem(cache)  # the history and the folder's ledger are sealed with it
    if problem:
        raise OptionError(problem)
    end = publish_run(record, target, compare_run=compare_to, figure_cache=cache / "figures")
    if end.failed or end.errors:
        raise RuntimeError("; ".join(end.failed + end.errors))
    return end
