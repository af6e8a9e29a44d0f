"""The suite's command-line options, read once and checked before any work starts.

Every option and the profile are validated in ``pytest_configure`` (before collection,
pools or models), and a bad one stops the run with one message naming the option or
file, instead of failing after twenty minutes of pool building. Every path option is
expanded (``~``) and made absolute here, once (``path_option``); everything else — the
session, the report plugin — reads the resulting ``Settings``, never the raw options.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from fixtures.settings import DEFAULT_SPLITS, PROJECT_ROOT, Settings, default_cache_dir
from fixtures.study import EVALUATION_SPLITS, SPLITS
from harness.profile import Profile, ProfileError, load_profile

#: Splits a run may evaluate (Train feeds training only).
EVALUABLE = ("test", "confirmation", "development")


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("nevir", "Preference Is Not Position evaluation")
    group.addoption("--splits", default=",".join(DEFAULT_SPLITS),
                    help=f"comma-separated evaluation splits among {', '.join(EVALUABLE)} (default: %(default)s)")
    group.addoption("--results-dir", default=str(PROJECT_ROOT / "results"),
                    help="where tables, runs and the report are written (default: ./results)")
    group.addoption("--cache-dir", default=None,
                    help="pools, trained models and text-score caches (default: $NEVIR_CACHE_DIR or "
                         "~/.cache/preference-position)")
    group.addoption("--data-dir", default=os.environ.get("NEVIR_DATA_DIR"),
                    help="directory of official NevIR JSONL files instead of the vendored copy (env NEVIR_DATA_DIR)")
    group.addoption("--profile", default=os.environ.get("NEVIR_PROFILE", "embedded"),
                    help="profile in specs/profiles/ (embedded, paper) or a path to a .toml that may extend one")
    group.addoption("--subset-pairs", type=int, default=None,
                    help="run every spec on a seeded sample of about N pairs (whole source groups) per split")
    group.addoption("--subset-seed", type=int, default=0, help="seed of the --subset-pairs sample (default: 0)")
    group.addoption("--grader-sample", type=int, default=None,
                    help="cap every declared sample at N directions (whole pairs) per split; 0 = no sampling")
    group.addoption("--compare-to", default=None,
                    help="compare this run's tables with a saved run id (results/.history) or another results dir")


def _writable(path: Path, what: str) -> str | None:
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-check-"):
            pass
    except OSError as exc:
        return f"{what} {path} is not writable ({exc.strerror or exc})"
    return None


def path_option(value: str | os.PathLike[str]) -> Path:
    """A path as given on the command line or in the environment: ``~`` expanded, made absolute."""
    return Path(value).expanduser().resolve()


def read_settings(config: pytest.Config) -> Settings:
    """Settings from the options, or ``pytest.UsageError`` naming the first bad option."""
    opt = config.getoption
    splits = tuple(s.strip() for s in str(opt("splits")).split(",") if s.strip())
    problems: list[str] = []
    if not splits:
        problems.append(f"--splits {opt('splits')!r} names no split; choose among {', '.join(EVALUABLE)}")
    unknown = [s for s in splits if s not in EVALUABLE]
    if unknown:
        problems.append(f"--splits: unknown split(s) {unknown}; choose among {', '.join(EVALUABLE)}")
    if len(set(splits)) != len(splits):
        problems.append(f"--splits repeats a split: {list(splits)}")
    subset = opt("subset_pairs")
    if subset is not None and subset < 1:
        problems.append(f"--subset-pairs must be >= 1 (omit it to evaluate every pair), got {subset}")
    if subset is not None and [s for s in splits if s not in EVALUATION_SPLITS]:
        problems.append(f"--subset-pairs samples only {', '.join(EVALUATION_SPLITS)}; remove the other splits")
    sample = opt("grader_sample")
    if sample is not None and sample < 0:
        problems.append(f"--grader-sample must be >= 0 (0 = no sampling), got {sample}")
    data_dir = path_option(opt("data_dir")) if opt("data_dir") else None
    if data_dir is not None and not data_dir.is_dir():
        problems.append(f"--data-dir {data_dir} is not a directory")
    cache_dir = path_option(opt("cache_dir") or default_cache_dir())
    results_dir = path_option(opt("results_dir"))
    if not hasattr(config, "workerinput"):  # workers inherit the controller's checked directories
        for path, what in ((cache_dir, "--cache-dir"), (results_dir, "--results-dir")):
            problem = _writable(path, what)
            if problem:
                problems.append(problem)
    compare = opt("compare_to")
    if compare and path_option(compare).is_dir():  # a results folder (else a run id under results/.history)
        compare = str(path_option(compare))
    if problems:
        raise pytest.UsageError("; ".join(problems))
    return Settings(splits=splits, results_dir=results_dir, cache_dir=cache_dir, data_dir=data_dir,
                    profile=str(opt("profile")), subset_pairs=subset, subset_seed=opt("subset_seed"),
                    grader_sample=sample, compare_run=compare)


def read_profile(settings: Settings) -> Profile:
    """The run's profile, or ``pytest.UsageError`` with the file, table and key that is wrong."""
    try:
        return load_profile(settings.profile, SPLITS)
    except ProfileError as exc:
        raise pytest.UsageError(f"--profile: {exc}") from None
