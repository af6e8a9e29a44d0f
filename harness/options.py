"""The suite's command-line options, read once and checked before any work starts.

Every option and the profile are validated in ``pytest_configure`` (before collection,
pools or models), and a bad one stops the run with one message naming the option or
file, instead of failing after twenty minutes of pool building. Every path option is
expanded (``~``) and made absolute here, once (``path_option``); everything else — the
session, the report plugin, the export command — reads the resulting ``Settings``, never
the raw options. The options are declared once (``OPTIONS``) for pytest and for the
suite's own commands (``argument_parser``), so ``python -m harness.export`` takes exactly
the suite's ``--profile``, ``--splits``, ``--subset-pairs`` and the rest.

Then everything the run will load is resolved (``resolve_before_work``): the route models,
and for every ranker the run will compute, its models, files and factory. A missing module,
model folder or run file, or a hub model that is neither cached nor reachable, is one
message naming the file and ``[rankers.<name>]`` (or ``[models]``), before any training or
scoring and with nothing published.
"""
from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fixtures.artifacts import entry_kind, irregular_entries
from fixtures.data import NevIRDataError
from fixtures.datasets.pairs import read_pair_set, too_few_groups
from fixtures.freeze_pools import shipped_problems
from fixtures.models import ModelNotFound, model_problem, resolve_dense_model, resolve_sparse_model
from fixtures.settings import (DEFAULT_SPLITS, EVALUABLE_SPLITS, PROJECT_ROOT, SAMPLED_SPLITS, SPLITS, Settings,
                               default_cache_dir)
from fixtures.study import build_study
from fixtures.userkey import UserKeyError, user_key
from harness.profile import load_profile
from harness.profile_records import Profile, ProfileError
from harness.space import space_problem
from rankers.declarations import RankerDecl
from reports.history import compare_problem
from reports.transaction import results_problem

if TYPE_CHECKING:  # the library imports no pytest; only the plugin hooks below take its objects
    import pytest

GROUP = ("nevir", "Preference Is Not Position evaluation")
#: Every option of the suite, as (flag, argparse/pytest keyword arguments): declared once, read by both.
OPTIONS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("--splits", {"default": ",".join(DEFAULT_SPLITS),
                  "help": f"comma-separated evaluation splits among {', '.join(EVALUABLE_SPLITS)} (default: %(default)s)"}),
    ("--results-dir", {"default": str(PROJECT_ROOT / "results"),
                       "help": "where tables, runs and the report are written (default: ./results)"}),
    ("--cache-dir", {"default": None, "help": "pools, trained models and text-score caches (default: "
                                              "$NEVIR_CACHE_DIR or ~/.cache/preference-position)"}),
    ("--data-dir", {"default": os.environ.get("NEVIR_DATA_DIR"),
                    "help": "directory of official NevIR JSONL files instead of the vendored copy (env NEVIR_DATA_DIR)"}),
    ("--profile", {"default": os.environ.get("NEVIR_PROFILE", "embedded"),
                   "help": "profile in specs/profiles/ (embedded, paper) or a path to a .toml that may extend one"}),
    ("--subset-pairs", {"type": int, "default": None,
                        "help": "run every spec on a seeded sample of about N pairs (whole source groups) per split"}),
    ("--subset-seed", {"type": int, "default": 0, "help": "seed of the --subset-pairs sample (default: 0)"}),
    ("--grader-sample", {"type": int, "default": None,
                         "help": "cap every declared sample at N directions (whole pairs) per split; 0 = no sampling"}),
    ("--compare-to", {"default": None, "help": "compare this run's tables with a saved run id (results/.history) or "
                                               "another results dir holding every evaluated split (checked up front)"}),
    ("--max-judge-minutes", {"type": float, "default": None,
                             "help": "stop before a judging stage estimated (cache history or a few timed calls) to "
                                     "take longer than M minutes; the ranker's rows are then not evaluated"}),
    ("--gate-expectations", {"action": "store_true", "default": False,
                             "help": "fail a claim the profile reviewed as holds/fails that this run leaves inconclusive "
                                     "(CI's gate; otherwise it is a warning and listed at the top of report.md)"}),
    ("--retrain", {"action": "store_true", "default": False,
                   "help": "train the study's models (LambdaMART, the cross-encoder) again instead of reading the "
                           "models and judgments the checkout ships for the same inputs (docs/protocol.md"
                           "#shipped-reference)"}),
    ("--explain", {"action": "store_true", "default": False,
                   "help": "print the stages the run will compute (cached or to compute, with an estimate) and exit "
                           "before any work (harness.explain)"}),
    ("--max-stage-minutes", {"type": float, "default": None,
                             "help": "stop before any work when a stage the run must compute (a pool, a training, a "
                                     "ranking, a judging stage) is estimated above M minutes (the --explain plan)"}),
)


class OptionError(ValueError):
    """A bad option or profile; the message names it (the pytest plugin shows it as a usage error, a command
    as its one error line, ``evaluate()`` raises it)."""


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup(*GROUP)
    for flag, kwargs in OPTIONS:
        group.addoption(flag, **kwargs)


def argument_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """An argparse parser taking the suite's options (a command of its own adds its options to it)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    group = parser.add_argument_group(*GROUP)
    for flag, kwargs in OPTIONS:
        group.add_argument(flag, **kwargs)
    return parser


def _writable(path: Path, what: str, contents: bool = False) -> str | None:
    """Why ``path`` cannot be written (None when it can). With ``contents``, its folders and lock files too
    (a cache whose contents are read-only would fail on every lock it takes); symlinked parts are not followed."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-check-"):
            pass
    except OSError as exc:
        return f"{what} {path} is not writable ({exc.strerror or exc})"
    if not contents:
        return None
    blocked = []
    for folder, dirs, files in os.walk(path):
        blocked += [Path(folder, name) for name in (*dirs, *[f for f in files if f.endswith(".lock")])
                    if not os.access(Path(folder, name), os.W_OK)]
    if blocked:
        first = ", ".join(str(p.relative_to(path)) for p in blocked[:3])
        return (f"{what} {path}: {len(blocked)} of its folders and lock files are read-only (first: {first}); the "
                f"run needs to write there: make them writable (chmod -R u+w {path}) or choose another {what}")
    return None


def key_problem(cache_dir: Path | None) -> str | None:
    """Why the user's key cannot seal this run's stores (None: it can): its file's mode, owner, size or type, or a
    place inside the cache (``fixtures.userkey``, docs/reproducibility.md#sharing-a-cache); made on first use."""
    try:
        user_key(cache_dir)
    except UserKeyError as exc:
        return str(exc)
    return None


def _irregular(cache_dir: Path, results_dir: Path) -> str | None:
    """Why the cache cannot be used: it holds a link or anything but files and folders (None when it does not),
    outside a results folder the user put inside it (which links its splits). The suite makes none in its cache and
    reads none through a link (docs/reproducibility.md#what-each-store-holds)."""
    odd = [p for p in irregular_entries(cache_dir) if not p.is_relative_to(results_dir)]
    if not odd:
        return None
    first = ", ".join(f"{p.relative_to(cache_dir)} ({entry_kind(p.lstat().st_mode)})" for p in odd[:3])
    return (f"--cache-dir {cache_dir}: {len(odd)} of its entries are links or not regular files (first: {first}); "
            "the suite makes none and never reads through one (someone who can write the cache put them there): "
            "remove them")


def path_option(value: str | os.PathLike[str]) -> Path:
    """A path as given on the command line or in the environment: ``~`` expanded, made absolute."""
    return Path(value).expanduser().resolve()


def settings_from(get: Callable[[str], Any], *, check_dirs: bool = True) -> Settings:
    """Settings from option values (``get(dest)``), or ``OptionError`` naming every bad option.

    ``check_dirs`` is False on pytest-xdist workers: they inherit the controller's checked directories.
    """
    splits = tuple(s.strip() for s in str(get("splits")).split(",") if s.strip())
    problems: list[str] = []
    if not splits:
        problems.append(f"--splits {get('splits')!r} names no split; choose among {', '.join(EVALUABLE_SPLITS)}")
    unknown = [s for s in splits if s not in EVALUABLE_SPLITS]
    if unknown:
        problems.append(f"--splits: unknown split(s) {unknown}; choose among {', '.join(EVALUABLE_SPLITS)}")
    if len(set(splits)) != len(splits):
        problems.append(f"--splits repeats a split: {list(splits)}")
    subset = get("subset_pairs")
    if subset is not None and subset < 1:
        problems.append(f"--subset-pairs must be >= 1 (omit it to evaluate every pair), got {subset}")
    if subset is not None and [s for s in splits if s not in SAMPLED_SPLITS]:
        problems.append(f"--subset-pairs samples only {', '.join(SAMPLED_SPLITS)}; remove the other splits")
    sample = get("grader_sample")
    if sample is not None and sample < 0:
        problems.append(f"--grader-sample must be >= 0 (0 = no sampling), got {sample}")
    budget = get("max_judge_minutes")
    if budget is not None and not budget > 0:
        problems.append(f"--max-judge-minutes must be > 0 minutes (omit it for no limit), got {budget}")
    data_dir = path_option(get("data_dir")) if get("data_dir") else None
    if data_dir is not None and not data_dir.is_dir():
        problems.append(f"--data-dir {data_dir} is not a directory")
    cache_dir = path_option(get("cache_dir") or default_cache_dir())
    results_dir = path_option(get("results_dir"))
    compare = get("compare_to")
    if compare and path_option(compare).is_dir():  # a results folder (else a run id under results/.history)
        compare = str(path_option(compare))
    if check_dirs:
        for path, what in ((cache_dir, "--cache-dir"), (results_dir, "--results-dir")):
            problem = _writable(path, what, contents=path == cache_dir)
            if problem:
                problems.append(problem)
        problem = _irregular(cache_dir, results_dir)
        if problem:
            problems.append(problem)
        key = key_problem(cache_dir)  # the key every store is sealed with, before any sealed file is read
        foreign = None if key else results_problem(results_dir, splits)  # docs/outputs.md#whose-folder
        if key or foreign:
            problems.append(key or f"--results-dir: {foreign}")
        if compare and splits and not key:
            problem = compare_problem(results_dir, compare, splits)
            if problem:
                problems.append(problem)
    if problems:
        raise OptionError("; ".join(problems))
    return Settings(splits=splits, results_dir=results_dir, cache_dir=cache_dir, data_dir=data_dir,
                    profile=str(get("profile")), subset_pairs=subset, subset_seed=get("subset_seed"),
                    grader_sample=sample, compare_run=compare, gate_expectations=bool(get("gate_expectations")),
                    max_judge_minutes=budget, retrain=bool(get("retrain")))


def read_settings(config: pytest.Config) -> Settings:
    """Settings from pytest's options, or ``OptionError`` naming every bad option (the root conftest shows it as
    pytest's usage error)."""
    return settings_from(config.getoption, check_dirs=not hasattr(config, "workerinput"))


def read_profile(settings: Settings) -> Profile:
    """The run's profile, or ``OptionError`` with the file, table and key that is wrong."""
    try:
        return load_profile(settings.profile, SPLITS)
    except ProfileError as exc:
        raise OptionError(f"--profile: {exc}") from None


def fit_to_data(settings: Settings, profile: Profile) -> Settings:
    """The settings with the splits the profile's dataset holds, after reading and checking its files; a bad row,
    or no requested split in the dataset, is one ``OptionError`` naming file, line and field before any work.

    A pair set without splits is one evaluation split (``test``), so the default ``--splits test,confirmation``
    evaluates that one (docs/protocol.md#your-own-contrastive-pairs).
    """
    if profile.data.kind != "pairs":
        return settings
    if settings.data_dir is not None:
        raise OptionError(f"--data-dir {settings.data_dir} (or NEVIR_DATA_DIR) names NevIR files, but "
                          f"{profile.data.where} declares kind = 'pairs'; drop one of them")
    try:
        pair_set = read_pair_set(profile.data)
    except NevIRDataError as exc:
        raise OptionError(f"{profile.data.where}: {exc}; nothing was computed") from None
    held = pair_set.splits
    splits = tuple(s for s in settings.splits if s in held)
    problem = too_few_groups(pair_set, splits, f"{profile.data.where} ({profile.data.pairs})")
    if problem:
        raise OptionError(f"{problem}; nothing was computed")
    if not splits:
        raise OptionError(f"--splits {','.join(settings.splits)}: dataset {profile.data.name!r} "
                          f"({profile.data.pairs}) holds none of them; its splits: {list(held)}")
    return replace(settings, splits=splits)


def use_pythonpath(profile: Profile) -> None:
    """Put the profile's ``pythonpath`` folders at the front of ``sys.path`` (once), where factories are found."""
    for folder in reversed(profile.pythonpath):
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))


def needed(profile: Profile, chosen: Iterable[RankerDecl]) -> list[RankerDecl]:
    """The chosen rankers and every ranker they read (reference, tie-breaker, baseline), transitively; a ranker on a
    sequential sample reads every ranker on that sample, whose claims decide where the sample stops
    (docs/statistics.md#sequential-samples)."""
    sequential = {n for n, s in profile.samples.items() if s.sequential}
    out: dict[str, RankerDecl] = {}
    todo = list(chosen)
    while todo:
        decl = todo.pop()
        if decl.name in out:
            continue
        out[decl.name] = decl
        todo += [profile.rankers[n] for n in (decl.reference, decl.tie_breaker, decl.baseline)
                 if n is not None and n in profile.rankers]
        if decl.population in sequential:
            todo += [d for d in profile.rankers.values() if d.population == decl.population]
    return [d for d in profile.ordered() if d.name in out]


def _route_problem(profile: Profile, role: str) -> str | None:
    name = str(profile.models.get(role, "") or "builtin:")
    if name.startswith("builtin:"):
        try:
            (resolve_dense_model if role == "dense" else resolve_sparse_model)(None)
        except ModelNotFound as exc:
            return f"{profile.path} [models] {role}: {exc}"
        return None
    problem = model_problem(name, f"{role} route")
    return None if problem is None else f"{profile.path} [models] {role}: {problem}"


def resolve_before_work(settings: Settings, profile: Profile,
                        selected: Callable[[RankerDecl], bool] = lambda decl: True) -> None:
    """Resolve everything the run will load before any of it, or ``OptionError`` listing every problem.

    The route models (every pool needs them), then each ranker the run computes — those ``selected``
    (e.g. by ``-m``) and every ranker they read — whose requirements this machine meets (a ranker it
    cannot run is skipped with its reason instead): its kind's ``preflight`` (models, files, factory), then what
    its files hold against the data (``preflight_data``: a run file's qids).
    """
    use_pythonpath(profile)
    problems = [p for p in (_route_problem(profile, role) for role in ("dense", "sparse")) if p]
    problems += shipped_problems()  # an edited shipped pool: one message (docs/protocol.md#frozen-pools)
    study = functools.cache(lambda: build_study(settings.data_dir))  # only a kind that reads its own data asks
    decls = needed(profile, (d for d in profile.ordered() if selected(d)))
    if not problems:  # the cache must hold what the run copies into it from the checkout (harness.space)
        problems += [p for p in [space_problem(settings, profile, decls, study)] if p]
    for decl in decls:
        if any(not r.met() for r in decl.requirements()):
            continue
        found = (decl.ranker_kind.preflight(decl.options, settings.splits)
                 or decl.ranker_kind.preflight_data(decl.options, settings.splits, study))
        problems += [f"{profile.path} [rankers.{decl.name}]: {p}" for p in found]
    if problems:
        raise OptionError("cannot start, nothing was computed:\n  " + "\n  ".join(problems))
