"""Root pytest configuration: options, the session-wide evaluation, declared-ranker parametrization.

The profile is read and every option checked in ``pytest_configure``, before collection;
specs are parametrized over the profile's declared rankers (``ranker``, ``window_ranker``,
``graded_ranker``), claims and pins, so a new declaration gets its rows and claims with no
code change. A parameter carries the pytest marks its rankers declare, and is skipped with
the reason when this machine lacks what one of its rankers needs (its kind's requirements:
llama-cpp-python for the CPU grader, CUDA for ``gpu`` rankers, an optional package).
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

# llama.cpp and torch share libgomp: passive waiting must be set before either loads (shared 2-core CPUs).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from fixtures.settings import pin_cpu_kernels  # noqa: E402

pin_cpu_kernels()  # before anything loads torch: the same pools and scores on every AVX2 machine

import pytest  # noqa: E402

from fixtures import progress  # noqa: E402
from fixtures.settings import Settings  # noqa: E402
from harness.claims import (check_claim_names, designated_twins, h2_claims, h3_claims, same_scorer,  # noqa: E402
                            tie_twins)
from harness.options import (OptionError, add_options, fit_to_data, needed, read_profile,  # noqa: E402
                             read_settings, resolve_before_work, use_pythonpath)
from harness.profile_records import Profile  # noqa: E402
from rankers.declarations import RankerDecl  # noqa: E402

pytest_plugins = ["reports.plugin"]

SPECS = Path(__file__).resolve().parent / "specs"
SETTINGS = pytest.StashKey[Settings]()
PROFILE = pytest.StashKey[Profile]()
#: Per declared ranker, the reasons it cannot run on this machine (empty: it can), checked once.
UNMET = pytest.StashKey[dict[str, tuple[str, ...]]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    """Read options and the profile once (before any work); route progress lines to the real terminal."""
    settings = read_settings(config)
    profile = read_profile(settings)
    try:
        settings = fit_to_data(settings, profile)
    except OptionError as exc:
        raise pytest.UsageError(str(exc)) from None
    check_claim_names(profile)
    use_pythonpath(profile)
    if not hasattr(config, "workerinput"):  # the controller resolves models, files and factories once
        try:
            resolve_before_work(settings, profile, _selected_by_marks(config))
        except OptionError as exc:
            raise pytest.UsageError(str(exc)) from None
    from reports.plugin import SETTINGS as PUBLISHING  # registered by pytest_plugins before configure

    config.stash[SETTINGS] = config.stash[PUBLISHING] = settings
    config.stash[PROFILE] = profile
    config.stash[UNMET] = {}
    worker = getattr(config, "workerinput", {}).get("workerid")
    # Capture is suspended during configure, so fd 2 is the terminal here; a duplicate stays usable under capture.
    progress.configure(os.fdopen(os.dup(2), "w", buffering=1), enabled=config.get_verbosity() >= 0,
                       prefix=f"[{worker}] " if worker else "")


@pytest.fixture(scope="session")
def settings(pytestconfig: pytest.Config) -> Settings:
    return pytestconfig.stash[SETTINGS]


@pytest.fixture(scope="session")
def evaluation(pytestconfig: pytest.Config):
    """The session's pools, populations and declared rankers, built lazily and cached on disk."""
    from harness.session import Evaluation

    return Evaluation(pytestconfig.stash[SETTINGS], pytestconfig.stash[PROFILE])


@pytest.fixture(autouse=True)
def _stage_timings(request: pytest.FixtureRequest):
    """Stage timings of whatever a spec computed travel to the report with its rows (manifest.json)."""
    yield
    if "evaluation" in request.fixturenames:
        from reports.plugin import ReportRecorder  # registered by pytest_plugins; an early import blocks its rewrite

        recorder = ReportRecorder(request.node)
        params = getattr(getattr(request.node, "callspec", None), "params", {})
        splits = [params["split"]] if "split" in params else list(request.config.stash[SETTINGS].splits)
        for record in request.getfixturevalue("evaluation").clock.drain():
            row = {**{k: v for k, v in record.items() if k != "split"}, "stage": f"{record['stage']} ({record['split']})"}
            for split in splits:  # Train/development stages belong to every evaluated split's manifest
                recorder.stage(split, row)


def _selected_by_marks(config: pytest.Config):
    """Whether ``-m`` keeps a ranker's rows (its declared marks against the mark expression)."""
    expression = config.getoption("markexpr", "")
    if not expression:
        return lambda decl: True
    from _pytest.mark.expression import Expression  # pytest's own -m grammar

    compiled = Expression.compile(expression)
    return lambda decl: compiled.evaluate(lambda name, **_: name in decl.marks)


def _unmet(config: pytest.Config, decl: RankerDecl) -> tuple[str, ...]:
    """Why this machine cannot run a declared ranker (its requirements that are not met), checked once per run."""
    unmet = config.stash[UNMET]
    if decl.name not in unmet:
        unmet[decl.name] = tuple(r.reason for r in decl.requirements() if not r.met())
    return unmet[decl.name]


def _param(config: pytest.Config, value: object, decls: Iterable[RankerDecl], id: str | None = None) -> pytest.param:
    """A parameter carrying the pytest marks of every ranker it computes (llm, gpu, slow) — its rankers and those
    they read (reference, tie-breaker, baseline), so ``-m`` never lets a check compute a deselected ranker — skipped
    with the reason when one of them cannot run here."""
    decls = needed(config.stash[PROFILE], decls)
    marks = [getattr(pytest.mark, m) for m in sorted({m for d in decls for m in d.marks})]
    reasons = sorted({r for d in decls for r in _unmet(config, d)})
    if reasons:
        marks.append(pytest.mark.skip(reason=f"{', '.join(d.name for d in decls)}: {'; '.join(reasons)}"))
    return pytest.param(value, marks=marks, id=id or str(value))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize specs over splits and over what the profile declares."""
    config = metafunc.config
    if PROFILE not in config.stash or not metafunc.definition.path.is_relative_to(SPECS):
        return  # unit tests under tests/ parametrize themselves
    profile, settings = config.stash[PROFILE], config.stash[SETTINGS]
    decls = profile.rankers

    def _rankers(chosen: Iterable[RankerDecl]) -> list:
        return [_param(config, d.name, [d]) for d in chosen]

    names = metafunc.fixturenames
    if "split" in names:
        metafunc.parametrize("split", list(settings.splits), scope="session")
    if "ranker" in names:
        metafunc.parametrize("ranker", _rankers(profile.ordered()))
    if "pool_ranker" in names:
        metafunc.parametrize("pool_ranker", _rankers(d for d in profile.ordered() if not d.is_window))
    if "seeded_ranker" in names:  # learned rankers trained with several seeds
        metafunc.parametrize("seeded_ranker", _rankers(d for d in profile.ordered()
                                                       if len(d.ranker_kind.seeds(d.options, settings.seed)) > 1))
    if "scored_ranker" in names:  # one per distinct scorer: twins reading the same judgments share it
        distinct: list = []
        for decl in profile.window_rankers():
            if not any(same_scorer(decl, other) for other in distinct):
                distinct.append(decl)
        metafunc.parametrize("scored_ranker", _rankers(distinct))
    if "window_ranker" in names:
        metafunc.parametrize("window_ranker", _rankers(profile.window_rankers()))
    if "graded_ranker" in names:
        graded = set(h3_claims(profile).values())
        metafunc.parametrize("graded_ranker", _rankers(d for d in profile.window_rankers() if d.name in graded))
    if "h2_claim" in names:
        metafunc.parametrize("h2_claim", [_param(config, n, [decls[r], decls[v]])
                                          for n, (r, v, _) in h2_claims(profile).items()])
    if "comparison" in names:
        metafunc.parametrize("comparison", [_param(config, c.name, [decls[c.ranker], decls[c.versus]])
                                            for c in profile.comparisons()])

    def _trained(name: str) -> bool:
        return bool(profile.seeds(name, settings.seed))
    if "trained_ranker" in names:  # rankers trained with seeds (LambdaMART's variants)
        metafunc.parametrize("trained_ranker", _rankers(d for d in profile.ordered() if _trained(d.name)))
    if "trained_comparison" in names:  # comparisons involving such a ranker
        metafunc.parametrize("trained_comparison", [_param(config, c.name, [decls[c.ranker], decls[c.versus]])
                                                    for c in profile.comparisons()
                                                    if _trained(c.ranker) or _trained(c.versus)])
    for fixture, twins in (("tie_twin", tie_twins), ("designated_twin", designated_twins)):
        if fixture in names:
            metafunc.parametrize(fixture, [_param(config, key, [decls[r] for r in pair])
                                           for key, pair in twins(profile).items()])
    if "sequential_sample" in names:  # carries the marks of every ranker on the sample: they decide its stop
        metafunc.parametrize("sequential_sample", [
            _param(config, n, [d for d in profile.ordered() if d.population == n])
            for n, s in profile.samples.items() if s.sequential and any(d.population == n for d in decls.values())])
    if "ranked_population" in names:
        populations: dict[str, list[RankerDecl]] = {}
        for decl in profile.ordered():
            populations.setdefault(decl.population, []).append(decl)
        metafunc.parametrize("ranked_population", [_param(config, p, ds) for p, ds in populations.items()])
    if "gated_ranker" in names:
        metafunc.parametrize("gated_ranker", _rankers(profile.gated()))
    if "pin" in names:
        scope = settings.run_scope()
        metafunc.parametrize("pin", [_param(config, p, [decls[p.ranker]], id=f"{p.split}-{p.ranker}-{p.measure}")
                                     for p in profile.pins if p.scope == scope and p.split in settings.splits])


def pytest_ignore_collect(collection_path, config: pytest.Config) -> bool | None:
    """Under --benchmark-skip the benchmarks would all be skipped: do not even import them (torch, llama.cpp)."""
    if collection_path.name.startswith("bench_") and config.getoption("benchmark_skip", False):
        return True
    return None


def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict) -> None:
    """Record accelerator and runtime versions with every saved benchmark, so commits compare like with like."""
    import importlib.metadata as md

    versions = {}
    for dist in ("torch", "transformers", "sentence-transformers", "lightgbm", "llama-cpp-python", "vllm"):
        try:
            versions[dist] = md.version(dist)
        except md.PackageNotFoundError:
            versions[dist] = None
    machine_info["nevir_runtime"] = versions
    try:
        import torch  # heavy: only when a benchmark is saved

        machine_info["cuda"] = {"available": torch.cuda.is_available(),
                                "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                                "torch_threads": torch.get_num_threads()}
    except ImportError:
        machine_info["cuda"] = None
