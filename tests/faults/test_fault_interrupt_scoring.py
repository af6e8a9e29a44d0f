"""Failure 4, inside the real scorer loops: Ctrl-C while a scorer is scoring exits 2 (pytest's code for an
interrupted session), without a traceback, publishes nothing and keeps every score finished before it.

The real specs on the CI subset: a designated-pairs ranker whose judgments no cache holds yet (an empty cache
folder) is interrupted as soon as its first chunk of scores is committed, after the Table II rows of two fusion
variants were recorded (rows the interrupted run must not publish) — once in the in-process llama.cpp grader
(SmolLM2), once in a rerank server client. The run holds right after that first commit (``tests.support.hold``,
point ``scored``) and the signal is sent only then, so the interrupt lands mid-scoring however busy the machine is.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.settings import PROJECT_ROOT
from tests.support.hold import Hold
from tests.support.rerank_server import contract_rerank_server
from tests.support.score_cache import rows_in_live_cache

SUBSET = ("--subset-pairs", "24", "--subset-seed", "0")
PROFILE = """
[profile]
name = "faults-interrupt"

[models]
dense = "builtin:all-MiniLM-L6-v2"
sparse = "builtin:splade-tiny"

[rankers.fusion]
kind = "fusion"
order = 10

[rankers.fusion_b]
kind = "fusion"
weights = {{ dense = 0.55, sparse = 0.30 }}
order = 20

[rankers.judge]
mode = "designated"
order = 50
{judge}
"""


def _cache_with_fresh_scores(tmp_path: Path) -> Path:
    """An empty cache folder, so no score is cached yet: the subset's pools are the shipped frozen pools' rows (a
    cache never links to another: a run refuses one that does, docs/reproducibility.md#what-each-store-holds)."""
    cache = tmp_path / "cache"
    cache.mkdir()
    return cache



def _interrupt_while_scoring(tmp_path: Path, judge: str) -> None:
    cache, results = _cache_with_fresh_scores(tmp_path), tmp_path / "results"
    profile = tmp_path / "interrupt.toml"
    profile.write_text(PROFILE.format(judge=judge), encoding="utf-8")
    # Without the H2 and H3 specs the judge is first scored for its Table II row, after the fusion variants' rows.
    hold = Hold(tmp_path / "hold", "scored")
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "specs", "-k", "not test_h2 and not test_h3", "-p",
                             "no:cacheprovider", "-p", "tests.support.hold", "--benchmark-skip",
                             *SUBSET, "--profile", str(profile), "--cache-dir", str(cache), "--results-dir",
                             str(results), "-q"], cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                                                 **hold.env()})
    kept = rows_in_live_cache(cache) if hold.reached(proc) else 0  # held right after its first committed chunk
    if kept:
        proc.send_signal(signal.SIGINT)  # never released: the interrupt ends the hold
    out, _ = proc.communicate(timeout=600)
    assert kept, f"no score was committed before the run ended:\n{out[-3000:]}"
    assert proc.returncode == 2, out[-3000:]
    assert "Traceback (most recent call last)" not in out, out[-3000:]
    assert "KeyboardInterrupt" in out and "the run was interrupted: nothing published" in out, out[-3000:]
    assert not results.exists() or not [p for p in results.rglob("*") if p.is_file()]  # nothing published
    assert rows_in_live_cache(cache) >= kept  # every score finished before the interrupt is still there


@pytest.mark.llm
def test_sigint_in_the_llama_cpp_grader_exits_2_and_keeps_finished_scores(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    _interrupt_while_scoring(tmp_path, 'kind = "llm_grader"\nbackend = "llamacpp"\n'
                                       'model = "builtin:smollm2-135m-instruct"\nn_threads = 2\n')


def test_sigint_in_a_rerank_server_client_exits_2_and_keeps_finished_scores(tmp_path: Path) -> None:
    with contract_rerank_server(lambda q, p: float(len(p) % 7)) as server:
        _interrupt_while_scoring(tmp_path, f'kind = "rerank_api"\nurl = "{server.base_url}"\nmodel = "held"\n'
                                           'concurrency = 2\n')
