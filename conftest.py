"""Root pytest configuration: evaluation options, the session-wide evaluation fixture, the report plugin."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

# Offline by construction: the embedded defaults never touch a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

pytest_plugins = ["reports.plugin"]

from fixtures.settings import DEFAULT_SPLITS, PROJECT_ROOT, Settings, default_cache_dir  # noqa: E402


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("nevir", "Preference Is Not Position evaluation")
    group.addoption("--splits", default=",".join(DEFAULT_SPLITS),
                    help="comma-separated evaluation splits among test, confirmation, development (default: %(default)s)")
    group.addoption("--results-dir", default=str(PROJECT_ROOT / "results"),
                    help="where tables, runs and the report are written (default: ./results)")
    group.addoption("--cache-dir", default=None,
                    help="pools, trained models and text-score caches (default: $NEVIR_CACHE_DIR or ~/.cache/preference-position)")
    group.addoption("--data-dir", default=os.environ.get("NEVIR_DATA_DIR"),
                    help="directory of official NevIR JSONL files instead of the vendored copy (env NEVIR_DATA_DIR)")
    group.addoption("--profile", default=os.environ.get("NEVIR_PROFILE", "embedded"),
                    help="model profile and thresholds file in specs/profiles/ (embedded, paper) or a path to a .toml")
    group.addoption("--subset-pairs", type=int, default=None,
                    help="run every spec on a seeded sample of about N pairs (whole source groups) per split")
    group.addoption("--subset-seed", type=int, default=0, help="seed of the --subset-pairs sample (default: 0)")
    group.addoption("--grader-sample", type=int, default=None,
                    help="directions (whole pairs) the LLM grader scores per split; 0 = all (default: from the profile)")
    group.addoption("--grader-url", default=os.environ.get("NEVIR_GRADER_URL"),
                    help="grade through an OpenAI-compatible server (e.g. `vllm serve Qwen/Qwen3-14B-AWQ`) at this /v1 URL")


@pytest.fixture(scope="session")
def settings(pytestconfig: pytest.Config) -> Settings:
    """The run's settings, from the command line."""
    opt = pytestconfig.getoption
    splits = tuple(s.strip() for s in opt("splits").split(",") if s.strip())
    return Settings(
        splits=splits,
        results_dir=Path(opt("results_dir")),
        cache_dir=Path(opt("cache_dir")) if opt("cache_dir") else default_cache_dir(),
        data_dir=Path(opt("data_dir")) if opt("data_dir") else None,
        profile=opt("profile"),
        subset_pairs=opt("subset_pairs"),
        subset_seed=opt("subset_seed"),
        grader_sample=opt("grader_sample"),
        grader_url=opt("grader_url"),
    )


@pytest.fixture(scope="session")
def evaluation(settings: Settings):
    """The session's pools, populations and rankers, built lazily and cached on disk."""
    from harness.session import Evaluation

    return Evaluation(settings)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Specs that take ``split`` run once per requested evaluation split."""
    if "split" in metafunc.fixturenames:
        splits = [s.strip() for s in metafunc.config.getoption("splits").split(",") if s.strip()]
        metafunc.parametrize("split", splits, scope="session")


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
        import torch

        machine_info["cuda"] = {"available": torch.cuda.is_available(),
                                "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                                "torch_threads": torch.get_num_threads()}
    except ImportError:
        machine_info["cuda"] = None
