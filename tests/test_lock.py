"""requirements.lock is the whole, hash-checked closure of what .ci/setup installs, and it is what is installed.

The lock is written by ``bash .ci/lock`` (uv) from pyproject.toml's ranges; these checks fail when a
dependency is added to pyproject.toml without re-locking, when a pin falls outside its declared range, and
when the running environment differs from the lock (a hand-installed upgrade would change numbers silently).
"""
from __future__ import annotations

import importlib.metadata as md
import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements.lock"
#: Installed by .ci/setup outside the lock (CPU build of torch; llama-cpp-python compiled from its hash-checked sdist).
OUTSIDE_LOCK = {"torch", "llama-cpp-python"}


def locked() -> dict[str, tuple[Version, int]]:
    """Package -> (pinned version, number of sha256 hashes), read from requirements.lock."""
    out: dict[str, tuple[Version, int]] = {}
    name = None
    for line in LOCK.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==([^\s\\]+)", line)
        if m:
            name = canonicalize_name(m.group(1))
            assert name not in out, f"requirements.lock pins {name} twice"
            out[name] = (Version(m.group(2)), 0)
        if name and "--hash=sha256:" in line:
            version, hashes = out[name]
            out[name] = (version, hashes + line.count("--hash=sha256:"))
    return out


def declared() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in ("llm", "rerankers", "test"):
        reqs += [Requirement(r) for r in project["optional-dependencies"][extra]]
    return reqs


def test_every_declared_dependency_is_pinned_within_its_range_with_hashes() -> None:
    pins = locked()
    for req in declared():
        name = canonicalize_name(req.name)
        if name in OUTSIDE_LOCK:
            continue
        assert name in pins, f"{req.name} is declared in pyproject.toml but not in requirements.lock: run bash .ci/lock"
        version, hashes = pins[name]
        assert req.specifier.contains(version, prereleases=True), \
            f"requirements.lock pins {req.name}=={version}, outside pyproject.toml's {req.specifier}: run bash .ci/lock"
        assert hashes >= 1, f"requirements.lock has no sha256 for {req.name}"


def test_the_lock_leaves_out_only_what_setup_installs_itself() -> None:
    pins = locked()
    assert not OUTSIDE_LOCK & set(pins), "torch and llama-cpp-python are installed by .ci/setup, not from the lock"
    assert not [p for p in pins if p.startswith("nvidia-")], "CUDA libraries in the lock: the CPU torch needs none"
    assert all(hashes for _, hashes in pins.values()), "every locked package needs its sha256 (pip --require-hashes)"


@pytest.mark.parametrize("package", ["numpy", "scipy", "pandas", "pyarrow", "lightgbm", "transformers",
                                     "sentence-transformers", "tokenizers", "scikit-learn"])
def test_the_environment_is_the_lock(package: str) -> None:
    """The numeric stack that decides every number is installed at exactly the locked version."""
    version, _ = locked()[canonicalize_name(package)]
    assert Version(md.version(package)) == version, \
        f"{package} {md.version(package)} is installed but requirements.lock pins {version}: rerun bash .ci/setup"
