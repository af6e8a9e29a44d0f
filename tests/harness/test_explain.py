"""``--explain``: every stage a run would compute, cached or to compute with an estimate, and nothing computed."""
from __future__ import annotations

import os
import subprocess
import sys

from fixtures.settings import PROJECT_ROOT
from harness.explain import CACHED, DOCUMENTED_S, TO_COMPUTE, PlannedStage, _estimated, render


def test_render_says_each_stage_state_and_cost_and_the_total():
    stages = [PlannedStage("test", "pool", CACHED),
              PlannedStage("train", "train_cross_encoder", TO_COMPUTE, 270.0, "full budget"),
              PlannedStage("test", "score_ce_window", TO_COMPUTE, None, "1,440 inputs", inputs=1440)]
    text = render(stages)
    assert "  pool (test): cached\n" in text
    assert "  train_cross_encoder (train): to compute, ~4.5 min [full budget]" in text
    assert "  score_ce_window (test): to compute, no measured rate here [1,440 inputs]" in text
    assert text.endswith("2 of 3 stages to compute, ~4.5 min estimated plus 1 without a measured rate")


def test_an_estimate_comes_from_the_last_run_here_per_judgment_or_else_the_documented_cost():
    score = PlannedStage("test", "score_ce_window", TO_COMPUTE, basis="1,440 inputs", inputs=1440)
    assert _estimated(score, {("test", "score_ce_window"): 0.01}).estimate_s == 14.4
    assert _estimated(score, {}).estimate_s is None  # nothing measured, nothing documented: said so
    rank = PlannedStage("test", "rank_bg8", TO_COMPUTE)
    assert _estimated(rank, {("test", "rank_bg8"): 95.0}).estimate_s == 95.0
    train = PlannedStage("train", "train_cross_encoder", TO_COMPUTE, basis="ci budget")
    assert _estimated(train, {}).estimate_s == DOCUMENTED_S[("train_cross_encoder", "ci budget")]
    cached = PlannedStage("test", "rank_bg8", CACHED)
    assert _estimated(cached, {("test", "rank_bg8"): 95.0}) == cached  # a cached stage costs a read


def test_explain_lists_the_example_pair_sets_stages_and_exits_0_before_any_work(tmp_path):
    """The README's example on an empty cache: its pools, the NevIR cross-encoder's fine-tuning and both windows are
    to compute, said before any of it; no pool is retrieved, no model trained, no memo or judgment written."""
    cache, results = tmp_path / "cache", tmp_path / "results"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-m", "pytest", "specs", "-p", "no:cacheprovider", "--profile",
                           "examples/policy_pairs.toml", "--cache-dir", str(cache), "--results-dir", str(results),
                           "--explain"], cwd=PROJECT_ROOT, capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert "pool (test): to compute" in out
    assert "train_cross_encoder (train): to compute, ~4.5 min [full budget; documented, quiet 2 cores]" in out
    assert "score_ce_window (test): to compute" in out and "score_minilm_window_window (test): to compute" in out
    assert "rank_fusion (test): to compute" in out
    assert "--explain: nothing was computed" in out + done.stderr
    assert not list(cache.rglob("*.safetensors"))  # no model trained
    assert not [p for p in (cache / "pools").glob("test-*.parquet")]  # the pair set's pool was not retrieved
    assert not (cache / "scores").exists() or not any((cache / "scores").iterdir())
    assert not (cache / "memo").exists() or not [p for p in (cache / "memo").rglob("*") if p.is_file()]
    assert not results.exists() or not any(results.iterdir())
