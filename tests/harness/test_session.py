"""The session's bookkeeping: stages are timed on their own, and nothing is written to the results folder."""
from __future__ import annotations

import time
from pathlib import Path

from fixtures.settings import Settings
from harness.profile import load_profile
from harness.session import Evaluation


def test_a_stage_is_timed_without_the_stages_it_triggered(tmp_path: Path) -> None:
    ev = Evaluation(Settings(cache_dir=tmp_path / "cache", results_dir=tmp_path / "results"), load_profile("embedded"))
    with ev.stage("test", "rank_ce"):
        time.sleep(0.05)
        with ev.stage("train", "train_cross_encoder"):
            time.sleep(0.3)
    inner, outer = ev.drain_stages()
    assert inner["stage"] == "train_cross_encoder" and inner["seconds"] >= 0.3
    assert outer["stage"] == "rank_ce" and 0.05 <= outer["seconds"] < 0.3 <= outer["with_nested_s"]
    assert ev.drain_stages() == []
    assert not (tmp_path / "results").exists()  # getters compute; only the publishing step writes results
