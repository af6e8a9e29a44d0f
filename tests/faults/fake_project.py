"""A small pytest project that reports through the suite's report plugin, run in a subprocess.

It stands in for ``specs/`` where a fault test needs a run it can interrupt at a chosen
point in a second or two: two splits, three declared rankers with Table II rows, claims,
Table I, a manifest, and sealed cached files behind a TREC run and a pool, like the real
specs hand to the publishing step. Environment variables steer one run: ``FAKE_STRICT``
(the numbers), ``FAKE_BROKEN`` (a ranker whose row test raises), ``FAKE_PAUSE_FILE`` (the claim
test, after every Table II row, creates this file, then sleeps: a run interrupted while computing).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from fixtures.artifacts import sha256_file
from fixtures.settings import PROJECT_ROOT

SPLITS = ("confirmation", "test")
RANKERS = ("fusion", "e0", "ce")

CONFTEST = '''
pytest_plugins = ["reports.plugin"]


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
import time
from pathlib import Path

import pytest

from fixtures.artifacts import seal
from reports.measures import TABLE2_ROW_COLUMNS

RANKERS = {"fusion": 10, "e0": 20, "ce": 30}
SPLITS = ("confirmation", "test")
STRICT = int(os.environ.get("FAKE_STRICT", "3"))


def sealed(config, name, text):
    path = Path(config.getoption("cache_dir")) / "results" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    seal(path)
    return str(path)


@pytest.mark.parametrize("split", SPLITS)
def test_manifest(report, split, pytestconfig):
    report.add("manifest", split, {"key": "code_commit", "value": "fake"})
    report.add("manifest", split, {"key": "profile", "value": {"name": "fake", "rankers": {r: {} for r in RANKERS}}})
    report.add("artifacts", split, {"artifact": "pool", "path": sealed(pytestconfig, f"pool-{split}.parquet",
                                                                        f"pool of {split}, {STRICT}")})


@pytest.mark.parametrize("split", SPLITS)
def test_table1(report, split):
    report.add("table1", split, {"population": split, "planned": 10})


@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("ranker", list(RANKERS))
def test_table2_row(report, split, ranker, pytestconfig):
    if ranker == os.environ.get("FAKE_BROKEN"):
        raise RuntimeError(f"{ranker}: deliberately broken declaration")
    row = dict.fromkeys(TABLE2_ROW_COLUMNS, float("nan"))
    row.update({"ranker": ranker, "n": 10, "strict": STRICT, "strict_pct": 10.0 * STRICT, "paired": 1,
                "paired_n": 5, "paired_pct": 20.0, "mrr": 0.5, "pref_at_1": 10.0, "ties": 0, "fallback": 0,
                "delta_pts": 1.0, "delta_lo": 0.5, "delta_hi": 1.5, "mean_rank_pos": 2.0, "mean_rank_neg": 3.0})
    report.add("table2", split, row, order=RANKERS[ranker])
    run = sealed(pytestconfig, f"run-{ranker}-{split}-{STRICT}.trec", f"{split}_q1 Q0 p1 1 {STRICT} {ranker}\\n")
    report.add("artifacts", split, {"artifact": f"run:{ranker}", "path": run})


@pytest.mark.parametrize("split", SPLITS)
def test_claim(report, split):
    if os.environ.get("FAKE_PAUSE_FILE"):  # after every Table II row: a run stopped in its last computations
        Path(os.environ["FAKE_PAUSE_FILE"]).touch()
        time.sleep(60)
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


def interrupt_when(folder: Path, results: Path, appears, sig: int, *args: str,
                   **env: str) -> tuple[subprocess.CompletedProcess, bool]:
    """Run the project and send ``sig`` as soon as ``appears()`` is true; (result, whether it was sent)."""
    proc = subprocess.Popen(command(folder, results, *args), cwd=folder, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=environment(**env))
    sent = False
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if appears():
            proc.send_signal(sig)
            sent = True
            break
        time.sleep(0.001)
    out, _ = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, ""), sent


def staging_of(results: Path, split: str):
    """True once a new file is being written for ``split`` anywhere but in the published results (the old
    layout staged in ``.staging-<split>-<pid>``, the new one in ``.runs/<run id>/<split>``)."""
    def files() -> set[Path]:
        return {p for folder in results.glob(".*") if folder.is_dir() and folder.name != ".history"
                for p in folder.rglob("*") if p.is_file() and split in p.relative_to(results).as_posix()}

    existing = files()
    return lambda: bool(files() - existing)


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

