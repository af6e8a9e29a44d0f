"""Root pytest configuration: options, the session's one run, declared-ranker parametrization.

The profile is read and every option checked in ``pytest_configure``, before collection;
specs are parametrized over the profile's declared rankers (``ranker``, ``window_ranker``,
``graded_ranker``), claims and pins, so a new declaration gets its rows and claims with no
code change. A parameter carries the pytest marks its rankers declare, and is skipped with
the reason when this machine lacks what one of its rankers needs (its kind's requirements:
llama-cpp-python for the CPU grader, CUDA for ``gpu`` rankers, an optional package).

A spec names the part of the run it checks (``@pytest.mark.part("table2_row")``). Before the first spec runs,
the session's run is computed once by the engine ``evaluate()`` uses (``harness.run.RunBuilder``): the parts of
the specs pytest collected after ``-k``, ``-m`` and paths, and nothing else. Each spec then gets its part's
outcome as a pytest outcome (its error raised, its reason skipped, its checks enforced: fail, xfail, warn) and
asserts over the ``record`` fixture, the same ``RunRecord`` a notebook gets and the report plugin publishes.
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
from harness.checks import subset_notice  # noqa: E402
from harness.claims import check_claim_names  # noqa: E402
from harness.options import (OptionError, add_options, fit_to_data, needed, read_profile,  # noqa: E402
                             read_settings, resolve_before_work, use_pythonpath)
from harness.profile_records import Profile  # noqa: E402
from rankers.declarations import RankerDecl  # noqa: E402
from reports.run_record import RunRecord  # noqa: E402

pytest_plugins = ["reports.plugin"]

SPECS = Path(__file__).resolve().parent / "specs"
SETTINGS = pytest.StashKey[Settings]()
PROFILE = pytest.StashKey[Profile]()
#: Per declared ranker, the reasons it cannot run on this machine (empty: it can), checked once.
UNMET = pytest.StashKey[dict[str, tuple[str, ...]]]()
#: What the profile declares, by parameter name (``harness.planning.parameters``), read once for every spec module.
DECLARED = pytest.StashKey[dict]()
#: The part of the run each collected spec checks (node id -> ``harness.run`` part key), set with the record.
PART_KEYS = pytest.StashKey[dict[str, tuple[str, str, str]]]()
#: The session's run record, once computed (the ``record`` fixture).
RECORD = pytest.StashKey[RunRecord]()
#: Per spec whose part this run does not compute, the rankers it needs that the run's selection leaves out.
LEFT_OUT = pytest.StashKey[dict[str, tuple[str, ...]]]()
#: Specs parametrized over something the profile declares none of (node id of the function): deselected.
UNDECLARED = pytest.StashKey[set[str]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    """Read options and the profile once (before any work); route progress lines to the real terminal."""
    config.addinivalue_line("markers", "part(name): the part of the run (harness.parts) a spec checks")
    try:
        settings = read_settings(config)
        profile = read_profile(settings)
        settings = fit_to_data(settings, profile)
        check_claim_names(profile)
        use_pythonpath(profile)
        if not hasattr(config, "workerinput"):  # the controller resolves models, files and factories once
            resolve_before_work(settings, profile, _selected_by_marks(config))
            for line in subset_notice(settings, profile):  # what this subset's gate cannot hold, said once
                progress.note(line)
            limit = config.getoption("max_stage_minutes")
            if config.getoption("explain") or limit is not None:  # what the run would compute, before any work
                from harness.explain import explain, over_limit, render

                stages = explain(settings, profile, _selected_by_marks(config))
                if config.getoption("explain"):
                    print(render(stages), flush=True)
                    pytest.exit("--explain: nothing was computed", returncode=0)
                problem = over_limit(stages, limit)
                if problem:
                    raise OptionError(problem)
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


@pytest.fixture(scope="session")
def record(request: pytest.FixtureRequest, evaluation) -> RunRecord:
    """The session's run, computed once by the engine ``evaluate()`` uses: the parts the collected specs name (what
    ``-k``, ``-m`` and paths left), in plan order; the report plugin publishes this record at the end."""
    from harness.planning import PARTS
    from harness.run import RunBuilder
    from reports.plugin import provide_run  # registered by pytest_plugins; an early import blocks its rewrite

    computed: dict[str, RunRecord] = {}
    provide_run(request.config, lambda: computed.get("record"))  # an interrupted run is said to publish nothing
    builder = RunBuilder(evaluation, _selected_by_marks(request.config))
    parameter = {p.name: p.parameter for p in PARTS}
    keys = request.config.stash[PART_KEYS] = {}
    for item in request.session.items:
        if (mark := item.get_closest_marker("part")) is not None and item.path.is_relative_to(SPECS):
            name, params = mark.args[0], getattr(getattr(item, "callspec", None), "params", {})
            value = params[parameter[name]] if parameter[name] else None
            keys[item.nodeid] = builder.key(name, value.split if parameter[name] == "pin" else params["split"], value)
    request.config.stash[LEFT_OUT] = {node: builder.left_out(key) for node, key in keys.items() if builder.left_out(key)}
    computed["record"] = request.config.stash[RECORD] = builder.run(set(keys.values()))
    return computed["record"]


@pytest.fixture(autouse=True)
def _part_record(request: pytest.FixtureRequest) -> None:
    """The session's run, computed (once) while the first spec that names a part is set up."""
    if request.node.get_closest_marker("part") is not None and request.node.path.is_relative_to(SPECS):
        request.getfixturevalue("record")


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> None:
    """A spec's part as its pytest outcome, when the spec is called: the part's error raised again (a failure), its
    reason skipped, its checks enforced (fail, xfail, warnings); then the spec's own assertions run."""
    key = pyfuncitem.config.stash.get(PART_KEYS, {}).get(pyfuncitem.nodeid)
    if key is None:
        return
    from reports.plugin import enforce  # registered by pytest_plugins; an early import blocks its rewrite

    left_out = pyfuncitem.config.stash[LEFT_OUT].get(pyfuncitem.nodeid)
    if left_out:  # e.g. -m llm keeps the grader's claims but not the baseline they compare with
        pytest.skip(f"needs {', '.join(left_out)}, which this run's selection (-m) does not compute")
    outcome = pyfuncitem.config.stash[RECORD].part(*key)
    if outcome.error is not None:
        raise outcome.error
    if outcome.skipped is not None:
        pytest.skip(outcome.skipped)
    enforce(outcome.checks)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A spec that reads the run record (the report plugin's mark, seen under -n); a spec over a parameter the
    profile declares none of (no window ranker, no pin) is deselected, not skipped as an empty parameter set."""
    from reports.plugin import RECORDS

    undeclared = config.stash.get(UNDECLARED, set())
    dropped = [item for item in items if item.nodeid.split("[", 1)[0] in undeclared]
    if dropped:
        items[:] = [item for item in items if item not in dropped]
        config.hook.pytest_deselected(items=dropped)
    for item in items:
        if item.get_closest_marker("part") is not None and item.path.is_relative_to(SPECS):
            item.add_marker(RECORDS)


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
    reasons = list(dict.fromkeys(f"{d.name}: {r}" for d in decls for r in _unmet(config, d)))
    if reasons:
        marks.append(pytest.mark.skip(reason="; ".join(reasons)))
    return pytest.param(value, marks=marks, id=id or str(value))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize specs over splits and over what the profile declares (``harness.planning.parameters``: the lists
    the run's parts range over, so a spec and its part name the same values)."""
    config = metafunc.config
    if PROFILE not in config.stash or not metafunc.definition.path.is_relative_to(SPECS):
        return  # unit tests under tests/ parametrize themselves
    settings = config.stash[SETTINGS]
    if "split" in metafunc.fixturenames:
        metafunc.parametrize("split", list(settings.splits), scope="session")
    if DECLARED not in config.stash:
        from harness.planning import parameters  # the run's plan loads with the first spec module, not for tests/ alone

        config.stash[DECLARED] = parameters(config.stash[PROFILE], settings)
    declared = config.stash[DECLARED]
    for name in metafunc.fixturenames:
        if name in declared and name != "population":
            if not declared[name]:  # nothing declared to check: deselected (pytest_collection_modifyitems)
                config.stash.setdefault(UNDECLARED, set()).add(metafunc.definition.nodeid)
            metafunc.parametrize(name, [_param(config, p.value, p.decls, id=p.id) for p in declared[name]])


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
