"""Declared rankers end to end on the seeded subset: rows, runs and claims with no code change.

A temporary profile extends the embedded one and declares rankers of every kind a
researcher brings: fusion under another name, the cross-encoder
declared twice, a Python factory, another system's TREC run (the suite's own exported
fusion run, whose row must equal fusion's), and a rerank server on 127.0.0.1 speaking the
published /v1/rerank contract. Declarations that break only once work started (an
unreachable server, a factory that raises, a malformed run file) fail their own tests
with one message naming the declaration, while every other ranker's results are still
computed and published; what can be found before (a hub model that cannot be resolved
offline, a missing module) stops the run at once (``test_first_hour.py``).
"""
from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from fixtures.settings import PROJECT_ROOT
from tests.support import oracle
from tests.support.checkpoints import tiny_checkpoint
from tests.support.rerank_server import contract_rerank_server

SUBSET = ("--subset-pairs", "24", "--subset-seed", "0", "--grader-sample", "4")  # the CI scope of the pins
SPLITS = ("test", "confirmation")


def run_specs(profile: Path, results: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "pytest", "specs", "-p", "no:cacheprovider", "--benchmark-skip",
                           "-m", "not llm", *SUBSET, "--profile", str(profile), "--results-dir", str(results),
                           "-q", *extra], cwd=PROJECT_ROOT, capture_output=True, text=True, env=env,
                          timeout=3600)


def overlap_score(query: str, passage: str) -> float:
    """The loopback server's model: share of query words found in the passage (deterministic)."""
    q = set(re.findall(r"\w+", query.lower()))
    return len(q & set(re.findall(r"\w+", passage.lower()))) / max(len(q), 1)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    root = tmp_path_factory.mktemp("e2e")
    base = root / "base.toml"
    base.write_text('[profile]\nname = "e2e-base"\nextends = "embedded"\n', encoding="utf-8")
    first = run_specs(base, root / "first", "-k", "table2_row and fusion and not fusion_sample")
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-4000:]
    factory = root / "raising_factory.py"
    factory.write_text("def make():\n    raise RuntimeError('checkpoint folder is empty')\n", encoding="utf-8")
    bad_run = root / "malformed.trec"  # five fields: read when ranked (a run's qids are checked before any work)
    bad_run.write_text("no-such-direction Q0 p1 1 1.0\n", encoding="utf-8")
    # A cross-encoder folder as a user has one, quantized: like = "ce" would need the fine-tuned model's weights,
    # which no subset run trains (the study's judgments of it ship; tests/rankers/test_shipped.py)
    tiny = tiny_checkpoint(root / "tiny-ce", 1, 11)
    with contract_rerank_server(overlap_score) as server:
        mine = root / "mine.toml"
        mine.write_text(f"""
[profile]
name = "e2e"
extends = "embedded"
pythonpath = ["."]

[rankers.fusion_again]
kind = "fusion"
order = 11

[rankers.ce_int8]
kind = "cross_encoder"
model = "{tiny}"
int8 = true
order = 41

[rankers.minilm_window]
kind = "python"
factory = "examples.bi_encoder_reranker:make_scorer"
order = 42

[rankers.fusion_run]
kind = "trec_run"
path = "{root / 'first' / 'partial'}/{{split}}/runs/fusion.trec"
order = 12

[rankers.overlap_api]
kind = "rerank_api"
url = "{server.base_url}"
model = "word-overlap"
order = 43

[rankers.bad_server]
kind = "rerank_api"
url = "http://127.0.0.1:9"
model = "nothing-listens-here"
order = 91

[rankers.bad_factory]
kind = "python"
factory = "raising_factory:make"
order = 92

[rankers.bad_run]
kind = "trec_run"
path = "{bad_run}"
order = 93
""", encoding="utf-8")
        second = run_specs(mine, root / "second")
    # -m "not llm" is a selection: such runs are published under <results>/partial/
    return {"root": root, "second": second, "results": root / "second" / "partial",
            "first": root / "first" / "partial"}


def table2(runs, split: str) -> pd.DataFrame:
    return pd.read_csv(runs["results"] / split / "table2.csv").set_index("ranker")


@pytest.mark.parametrize("split", SPLITS)
def test_every_declared_ranker_gets_its_row_run_and_claims(runs, split: str) -> None:
    t2 = table2(runs, split)
    for name in ("fusion_again", "ce_int8", "minilm_window", "fusion_run", "overlap_api"):
        assert name in t2.index, f"{name} has no Table II row"
        assert (runs["results"] / split / "runs" / f"{name}.trec").is_file(), f"{name} has no run file"
        assert f"{name}__strict" in pd.read_csv(runs["results"] / split / "directions.csv", nrows=1).columns
    claims = pd.read_csv(runs["results"] / split / "claims.csv")["claim"].tolist()
    for name in ("ce_int8", "minilm_window", "overlap_api", "fusion_run"):  # an outside run too: it can be gated
        assert f"h2_{name}_strict_gt_fusion" in claims and f"h2_{name}_mrr_gt_fusion" in claims
    assert "ce" in t2.index and t2.loc["ce", "n"] == t2.loc["ce_int8", "n"]  # two cross-encoder rows


@pytest.mark.parametrize("split", SPLITS)
def test_fusion_under_another_name_and_its_exported_run_reproduce_fusion(runs, split: str) -> None:
    """The exported run carries fusion's own scores, so read back as another system's run it has fusion's strict
    outcomes, ties and positions exactly."""
    t2 = table2(runs, split)
    columns = ["n", "strict", "paired", "mrr", "pref_at_1", "pref_at_10", "mean_rank_pos", "mean_rank_neg", "ties"]
    pd.testing.assert_series_equal(t2.loc["fusion_again", columns], t2.loc["fusion", columns], check_names=False)
    pd.testing.assert_series_equal(t2.loc["fusion_run", columns], t2.loc["fusion", columns], check_names=False)


@pytest.mark.parametrize("split", SPLITS)
def test_every_table2_value_is_reproduced_from_the_published_files(runs, split: str) -> None:
    """From results/<split>/ alone (runs, qrels, directions.csv, the manifest), ir_measures and NevIR's own paired
    definition give every ranker's n, strict preference, ties, paired accuracy, MRR, Pref@k and nDCG@10, E0's and
    N=8's ties included (docs/outputs.md#re-checking)."""
    assert oracle.differences(runs["results"] / split) == []
    assert {"e0", "bg8"} <= set(oracle.recompute(runs["results"] / split).index)


def test_broken_declarations_fail_alone_with_one_clear_message(runs) -> None:
    out = runs["second"].stdout
    assert runs["second"].returncode == 1
    assert re.search(r"\[rankers\.bad_server\].*127\.0\.0\.1:9", out)
    assert re.search(r"bad_factory.*checkpoint folder is empty", out)
    assert re.search(r"\[rankers\.bad_run\].*no-such-direction", out)
    for split in SPLITS:  # everything else was still computed and published
        t2 = table2(runs, split)
        assert {"fusion", "e0", "bg8", "ce", "minilm_window"} <= set(t2.index)
        assert not {"bad_server", "bad_factory", "bad_run"} & set(t2.index)
        manifest = json.loads((runs["results"] / split / "manifest.json").read_text())
        assert manifest["profile"]["name"] == "e2e"


def test_window_rankers_scored_every_window_input(runs) -> None:
    t2 = table2(runs, "test")
    for name in ("ce_int8", "minilm_window", "overlap_api"):
        assert t2.loc[name, "fallback"] == 0 and not math.isnan(t2.loc[name, "mrr"])


def test_a_moved_fusion_weight_fails_on_its_pinned_value(tmp_path: Path) -> None:
    """Claims keep their direction when fusion strict moves by a few directions; the CI subset's pins do not. The
    pins are the embedded profile's: a profile that extends it fails on them with ``inherit_checks = true``
    (without, they are reported: ``test_end_to_end_checks.py``), and the message names the file that pins them."""
    changed = tmp_path / "changed.toml"
    changed.write_text('[profile]\nname = "changed"\nextends = "embedded"\ninherit_checks = true\n'
                       '[rankers.fusion]\nweights = { dense = 0.55, sparse = 0.30 }\n', encoding="utf-8")
    result = run_specs(changed, tmp_path / "results", "-k", "pinned_value and fusion")
    out = result.stdout
    assert result.returncode == 1, out[-3000:]
    assert re.search(r"pinned fusion\.(strict|mrr) changed: then [0-9.]+, now [0-9.]+, Δ [-+0-9.e]+ "
                     r"\(tolerance ±[0-9.e-]+, unpaired\)", out)
    assert re.search(r"update \[pins\.subset-24-seed0-sample4\.(test|confirmation)\] in specs/profiles/embedded\.toml",
                     out)


PROBE = '''
import json, os, sys

def pytest_sessionfinish(session, exitstatus):
    with open(os.environ["NEVIR_PROBE_OUT"], "w") as fh:
        json.dump({m: m in sys.modules for m in ("torch", "transformers", "llama_cpp", "lightgbm",
                                                  "sentence_transformers")}, fh)
'''


def test_a_warm_rerun_loads_no_model_and_scores_nothing(tmp_path: Path) -> None:
    """A warm regeneration needs none of torch, transformers, llama.cpp or LightGBM, and calls no model."""
    (tmp_path / "warm_probe.py").write_text(PROBE, encoding="utf-8")
    base = tmp_path / "base.toml"
    base.write_text('[profile]\nname = "warm"\nextends = "embedded"\n', encoding="utf-8")
    first = run_specs(base, tmp_path / "first")
    assert first.returncode == 0, first.stdout[-3000:]
    env_path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{env_path}" if env_path else str(tmp_path)
    os.environ["NEVIR_PROBE_OUT"] = str(tmp_path / "modules.json")
    try:
        second = run_specs(base, tmp_path / "second", "-p", "warm_probe")
    finally:
        os.environ["PYTHONPATH"] = env_path
        del os.environ["NEVIR_PROBE_OUT"]
    assert second.returncode == 0, second.stdout[-3000:]
    loaded = json.loads((tmp_path / "modules.json").read_text())
    assert not any(loaded.values()), f"a warm run imported {[m for m, v in loaded.items() if v]}"
    for split in SPLITS:
        stages = json.loads((tmp_path / "second" / "partial" / split / "manifest.json").read_text())["stages_wall_clock"]
        scored = {k: v.get("scored_now") for k, v in stages.items() if "scored_now" in v}
        assert scored and not any(scored.values()), scored
        for name in ("table2.csv", "directions.csv", "claims.csv"):
            first, second = (tmp_path / run / "partial" / split / name for run in ("first", "second"))
            assert first.read_bytes() == second.read_bytes()
