"""A small pytest project that reports through the suite's report plugin, run in a subprocess.

It stands in for ``specs/`` where a fault test needs a run it can interrupt at a chosen
point in a second or two: two splits, three declared rankers with Table II rows, claims,
Table I, a manifest, and sealed cached files behind a TREC run and a pool, like the real
specs hand to the publishing step. Environment variables steer one run: ``FAKE_STRICT``
(the numbers), ``FAKE_BROKEN`` (a ranker whose row test raises), ``FAKE_SCORED_BY`` (the manifest names another
model that scored ``ce``, the shipped one refused), ``FAKE_BROKEN_SPLIT`` (a split whose every test
raises, as when its pool cannot be read), ``FAKE_TRUNCATED`` (inputs of its cost row
judged on a cut text), ``FAKE_HOLD_CLAIM`` (the claim
test, after every Table II row, holds the run, ``tests.support.hold``: a run interrupted while computing).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

from fixtures.artifacts import sha256_file
from fixtures.settings import PROJECT_ROOT
from tests.support.hold import Hold

SPLITS = ("confirmation", "test")
RANKERS = ("fusion", "e0", "ce")

CONFTEST = '''
pytest_plugins = ["reports.plugin", "tests.support.fake_engine"]


def pytest_addoption(parser):
    parser.addoption("--results-dir")
    parser.addoption("--cache-dir")
    parser.addoption("--compare-to")


def pytest_configure(config):
    from pathlib import Path

    from fixtures.settings import Settings
    from reports.plugin import SETTINGS

    config.stash[SETTINGS] = Settings(results_dir=Path(config.getoption("results_dir")),
                                      cache_dir=Path(config.getoption("cache_dir")),
                                      compare_run=config.getoption("compare_to"))
'''

SPEC = '''
import os
from pathlib import Path

import pandas as pd
import pytest

from fixtures.artifacts import seal
from reports.cost import stage_cost
from reports.measures import TABLE2_ROW_COLUMNS
from reports.record import Artifact

RANKERS = {"fusion": 10, "e0": 20, "ce": 30}
SPLITS = ("confirmation", "test")
STRICT = int(os.environ.get("FAKE_STRICT", "3"))


def broken(split):
    if split == os.environ.get("FAKE_BROKEN_SPLIT"):
        raise RuntimeError(f"{split}: its pool cannot be read (deliberately broken split)")


def sealed(config, name, text):
    path = Path(config.getoption("cache_dir")) / "results" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    seal(path)
    return path


@pytest.mark.parametrize("split", SPLITS)
def test_manifest(report, split, pytestconfig):
    broken(split)
    report.entry(split, "code_commit", "fake")
    report.entry(split, "profile", {"name": "fake", "rankers": {r: {} for r in RANKERS}})
    if os.environ.get("FAKE_SCORED_BY"):
        report.entry(split, "model:ce", {"ce": {
            "model": "the cross-encoder fine-tuned on the dataset's Train pools, ci budget", "path": "ce-ci",
            "model_key": "ce-ci-key", "source": "fine-tuned by this suite",
            "refused": "shipped judgments table x.parquet: sha256 differs"}})
    report.artifact(split, Artifact("pool", sealed(pytestconfig, f"pool-{split}.parquet", f"pool of {split}, {STRICT}")))


@pytest.mark.parametrize("split", SPLITS)
def test_table1(report, split):
    broken(split)
    report.add("table1", split, {"population": split, "planned": 10})
    cut = int(os.environ.get("FAKE_TRUNCATED", "0"))  # inputs the window scorer judged on a cut text
    scored = pd.DataFrame({"qid": [f"q{i}" for i in range(4)], "pid": "p1", "score": 1.0,
                           "usage": [{"seconds": 0.5, "truncated": float(i < cut)} for i in range(4)]})
    report.add("cost", split, stage_cost("ce_window", scored), order=30)


@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("ranker", list(RANKERS))
def test_table2_row(report, split, ranker, pytestconfig):
    broken(split)
    if ranker == os.environ.get("FAKE_BROKEN"):
        raise RuntimeError(f"{ranker}: deliberately broken declaration")
    row = dict.fromkeys(TABLE2_ROW_COLUMNS, float("nan"))
    row.update({"ranker": ranker, "n": 10, "strict": STRICT, "strict_pct": 10.0 * STRICT, "paired": 1,
                "paired_n": 5, "paired_pct": 20.0, "mrr": 0.5, "pref_at_1": 10.0, "ties": 0, "fallback": 0,
                "delta_pts": 1.0, "delta_lo": 0.5, "delta_hi": 1.5, "mean_rank_pos": 2.0, "mean_rank_neg": 3.0})
    report.add("table2", split, row, order=RANKERS[ranker])
    run = sealed(pytestconfig, f"run-{ranker}-{split}-{STRICT}.trec", f"{split}_q1 Q0 p1 1 {STRICT} {ranker}\\n")
    report.artifact(split, Artifact("run", run, ranker))


@pytest.mark.parametrize("split", SPLITS)
def test_claim(report, split):
    broken(split)
    if os.environ.get("FAKE_HOLD_CLAIM"):  # after every Table II row: a run stopped in its last computations
        from tests.support.hold import MARKER, RELEASE, hold_here

        hold_here(Path(os.environ[MARKER]), Path(os.environ[RELEASE]))
    report.add("claims", split, {"claim": "h_demo", "status": "holds", "expected": "> 0", "measured": f"+{STRICT}"})
'''


def write(folder: Path) -> Path:
    """The project in ``folder``; returns it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    (folder / "test_spec.py").write_text(SPEC, encoding="utf-8")
    return folder


def command(folder: Path, results: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--results-dir={results}",
            f"--cache-dir={folder / 'cache'}", "--rootdir", str(folder), "-c", os.devnull, *args]


def environment(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), **extra}


def run(folder: Path, results: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(command(folder, results, *args), cwd=folder, capture_output=True, text=True,
                          env=environment(**env), timeout=300)


def published_once(root: Path) -> Path:
    """``root`` holding the project (``project/``) with one complete run (strict = 3) published (``results/``)."""
    first = run(write(root / "project"), root / "results", FAKE_STRICT="3")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    return root


def interrupt_at(folder: Path, results: Path, hold: Hold, sig: int, *args: str, release: bool = False,
                 **env: str) -> tuple[subprocess.CompletedProcess, bool]:
    """Run the project held at ``hold``, send ``sig`` once it is held, then release it when ``release`` (a
    deferred signal acts at the next checkpoint); (result, whether the run reached the hold)."""
    proc = subprocess.Popen(command(folder, results, "-p", "tests.support.hold", *args), cwd=folder,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=environment(**hold.env(), **env))
    reached = hold.reached(proc)
    if reached:
        proc.send_signal(sig)
        if release:
            hold.release()
    out, _ = proc.communicate(timeout=600)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, ""), reached


def published(results: Path) -> dict[str, str]:
    """Per split, the run id of its published manifest."""
    return {split: json.loads((results / split / "manifest.json").read_text(encoding="utf-8"))["run_id"]
            for split in SPLITS}


def verify(results: Path) -> None:
    """Every published file of every split has the digest its manifest lists, and no file is unlisted."""
    for split in SPLITS:
        files = json.loads((results / split / "manifest.json").read_text(encoding="utf-8")).get("files")
        assert files, f"{split}: manifest.json lists no file digests"
        on_disk = {p.relative_to(results / split).as_posix() for p in (results / split).rglob("*")
                   if p.is_file() and p.name != "manifest.json"}
        assert set(files) == on_disk, f"{split}: manifest lists {sorted(files)}, folder has {sorted(on_disk)}"
        for name, digest in files.items():
            assert sha256_file(results / split / name) == digest, f"{split}/{name} differs from its manifest digest"


def strict(results: Path, split: str) -> list[int]:
    return pd.read_csv(results / split / "table2.csv")["strict"].tolist()

