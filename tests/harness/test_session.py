"""The session's bookkeeping: stages are timed on their own, and nothing is written to the results folder."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

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


@pytest.mark.parametrize("cap, sizes", [(None, (150, 4, 0)), (4, (4, 4, 4)), (200, (150, 4, 200)), (0, (0, 0, 0))])
def test_grader_sample_caps_every_declared_sample_and_zero_means_no_sampling(tmp_path: Path, cap, sizes) -> None:
    profile = tmp_path / "p.toml"
    profile.write_text('[profile]\nname = "x"\nextends = "embedded"\n[samples.everything]\ndirections = 0\n'
                       'seed = 0\n', encoding="utf-8")
    ev = Evaluation(Settings(cache_dir=tmp_path / "cache", grader_sample=cap), load_profile(str(profile)))
    assert tuple(ev.sample_size(n) for n in ("grader_pairs", "grader_windows", "everything")) == sizes
    assert ev.sample_seed("everything") == 0 and ev.sample_seed("grader_pairs") == ev.settings.seed


def test_a_declaration_refused_before_any_work_costs_only_its_own_rows(tmp_path, monkeypatch, capsys) -> None:
    """An unreachable server is found when the session starts, before any pool is built, and named each time."""
    from fixtures import progress
    from rankers.kinds.base import KindBuildError
    from tests.support.loopback import free_port

    dead = f"http://127.0.0.1:{free_port()}"
    profile = tmp_path / "mine.toml"
    profile.write_text('[profile]\nname = "mine"\nextends = "embedded"\n'
                       f'[rankers.rr]\nkind = "rerank_api"\nurl = "{dead}"\nmodel = "m"\n'
                       f'[rankers.oa]\nkind = "llm_grader"\nbackend = "openai"\nurl = "{dead}/v1"\nmodel = "m"\n',
                       encoding="utf-8")
    monkeypatch.setattr(Evaluation, "_snapshot", lambda self, split: pytest.fail(f"a pool of {split} was built"))
    monkeypatch.setattr(progress, "_CONFIG", progress._Config())  # progress lines to this test's stderr
    ev = Evaluation(Settings(cache_dir=tmp_path / "cache"), load_profile(str(profile)))
    assert sorted(ev.refused) == ["oa", "rr"]
    noted = capsys.readouterr().err
    assert f"declaration refused before any work: {profile} [rankers.rr]" in noted and "[rankers.oa]" in noted
    for name in ("rr", "oa"):
        for getter in (lambda: ev.row("test", name), lambda: ev.text_scores("test", name, "window")):
            with pytest.raises(KindBuildError, match=rf"\[rankers\.{name}\]: .* is unreachable: ConnectError"):
                getter()
    assert ev.decl("fusion").name == "fusion"  # every other declaration is as usable as before
