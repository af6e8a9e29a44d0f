"""The session's bookkeeping: stages are timed on their own, nothing is written to the results folder, and
outcomes are read back by their ranking's key."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from fixtures.settings import Settings
from harness.profile import load_profile
from harness.session import Evaluation
from rankers.base import Ranking


def test_a_stage_is_timed_without_the_stages_it_triggered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The clock the stages read is advanced by the test, so a loaded machine cannot move the seconds compared."""
    from harness import stages

    now = [100.0]
    monkeypatch.setattr(stages, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    ev = Evaluation(Settings(cache_dir=tmp_path / "cache", results_dir=tmp_path / "results"), load_profile("embedded"))
    with ev.stage("test", "rank_ce"):
        now[0] += 0.05
        with ev.stage("train", "train_cross_encoder"):
            now[0] += 0.3
        now[0] += 0.01
    inner, outer = ev.clock.drain()
    assert inner["stage"] == "train_cross_encoder" and inner["seconds"] == pytest.approx(0.3)
    assert outer["stage"] == "rank_ce" and outer["seconds"] == pytest.approx(0.06)
    assert outer["with_nested_s"] == pytest.approx(0.36)
    assert ev.clock.drain() == []
    assert not (tmp_path / "results").exists()  # getters compute; only the publishing step writes results


@pytest.mark.parametrize("cap, test, confirmation", [(None, (150, 4, 0), (100, 4, 0)), (4, (4, 4, 4), (4, 4, 4)),
                                                     (120, (120, 4, 120), (100, 4, 120)), (0, (0, 0, 0), (0, 0, 0))])
def test_grader_sample_caps_every_declared_sample_and_zero_means_no_sampling(tmp_path: Path, cap, test,
                                                                             confirmation) -> None:
    """The embedded grader sample is 150 directions on Test and 100 on confirmation; ``--grader-sample`` caps both."""
    profile = tmp_path / "p.toml"
    profile.write_text('[profile]\nname = "x"\nextends = "embedded"\n[samples.everything]\ndirections = 0\n'
                       'seed = 0\n', encoding="utf-8")
    ev = Evaluation(Settings(cache_dir=tmp_path / "cache", grader_sample=cap), load_profile(str(profile)))
    for split, sizes in (("test", test), ("confirmation", confirmation)):
        assert tuple(ev.sample_size(n, split) for n in ("grader_pairs", "grader_windows", "everything")) == sizes
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


def test_outcomes_are_memoized_under_their_ranking_s_key_so_a_warm_run_loads_no_ranking(tmp_path: Path,
                                                                                        monkeypatch) -> None:
    ev = Evaluation(Settings(cache_dir=tmp_path / "cache"), load_profile("embedded"))
    directions = pd.DataFrame({"qid": ["q1", "q2"], "pair_id": "p", "direction": [1, 2], "group": "g",
                               "preferred_pid": ["a", "b"], "counterpart_pid": ["b", "a"], "eligible": True})
    monkeypatch.setattr(ev, "directions_for", lambda split, name: directions)
    ranked = []

    def rank() -> Ranking:  # q1: a before b (strict); q2: a before b (b preferred: wrong order)
        ranked.append(1)
        frame = pd.DataFrame({"qid": ["q1", "q1", "q2", "q2"], "pid": ["a", "b", "a", "b"], "rank": [1, 2, 1, 2],
                              "k0": [2.0, 1.0, 2.0, 1.0], "k1": 0.0, "k2": 0.0})
        return Ranking("mine", frame)

    first = ev.outcomes_of("test", "mine", {"ranking": "v1"}, rank)
    assert first["strict"].tolist() == [True, False] and first.attrs["ranker"] == "mine"
    again = ev.outcomes_of("test", "mine", {"ranking": "v1"}, rank)
    assert ranked == [1] and again.equals(first) and again.attrs["ranker"] == "mine"  # read, not ranked again
    ev.outcomes_of("test", "mine", {"ranking": "v2"}, rank)
    assert ranked == [1, 1]  # another ranking, another key
    ev.outcomes_of("test", "mine", None, rank)
    assert ranked == [1, 1, 1]  # a ranking without a key (user code) is never memoized


def test_populations_are_memoized_by_the_pool_digest_so_a_warm_run_parses_no_pool(tmp_path: Path,
                                                                                 monkeypatch) -> None:
    """The frozen development pool: the first session parses it for coverage, the next reads its flags from the
    memo, and a pool with another digest is annotated again."""
    from fixtures import pools

    settings = Settings(cache_dir=tmp_path / "cache")
    parsed: list[Path] = []
    original = pools.load_pool_parquet
    monkeypatch.setattr(pools, "load_pool_parquet", lambda path, *rest: (parsed.append(Path(path)), original(path, *rest))[1])
    first = Evaluation(settings, load_profile("embedded")).population("development")
    assert len(parsed) == 1 and parsed[0].name.startswith("development-")
    assert first["covered"].any() and len(first) == 76
    warm = Evaluation(settings, load_profile("embedded"))
    again = warm.population("development")
    assert again.equals(first) and len(parsed) == 1  # read from the memo: no pool parsed
    monkeypatch.setattr(Evaluation, "pool_digest", lambda self, split: "another pool")
    Evaluation(settings, load_profile("embedded")).population("development")
    assert len(parsed) == 2  # another snapshot digest, another key


class _FakeJudge:
    """A pointwise judge (len(query) + len(passage)) that can be told to fail on some passages."""

    model_key = "fake-judge-v1"

    def __init__(self, fail_on: frozenset[str] = frozenset()) -> None:
        self.fail_on = fail_on

    def score(self, inputs):
        from rankers.scorers.base import ScoreBatch

        scores = np.array([np.nan if p in self.fail_on else float(len(q) + len(p)) for q, p in inputs])
        return ScoreBatch(scores, ["boom" if p in self.fail_on else None for _, p in inputs], [{}] * len(inputs),
                          [None] * len(inputs))


def test_window_judgments_read_whole_from_the_store_are_memoized_until_the_store_changes(tmp_path: Path,
                                                                                        monkeypatch) -> None:
    """A warm run reads a stage's judgments from one memo file. Judgments made now or unavailable are never kept
    (the next run judges again), and any change to the store is a new key."""
    from rankers.kinds.base import score_store
    from rankers.scorers.pointwise import score_with_cache
    from tests.support.score_cache import cache_key, delete_stored

    inputs = [("q1", "a", "query one", "passage a"), ("q1", "b", "query one", "passage bb")]
    judged: list[int] = []
    failing = {"passage bb"}

    def judge(decl, ctx, rows, desc):
        result = score_with_cache(_FakeJudge(frozenset(failing)), rows, score_store(ctx), progress=False)
        judged.append(result.n_scored)
        return result

    kind = load_profile("embedded").rankers["ce"].ranker_kind
    monkeypatch.setattr(kind, "identity", lambda decl, ctx: {"judge": _FakeJudge.model_key})
    monkeypatch.setattr(kind, "plan", lambda decl, ctx, rows: None)
    monkeypatch.setattr(kind, "judge", judge)

    def run():
        ev = Evaluation(Settings(cache_dir=tmp_path / "cache"), load_profile("embedded"))
        monkeypatch.setattr(ev, "inputs", lambda split, name, scope: inputs)
        return ev, ev.text_scores("test", "ce", "window")

    run()
    failing.clear()
    run()
    ev, read = run()
    assert judged == [2, 1, 0]  # one unavailable, then judged again, then read whole from the store
    _, again = run()
    assert judged == [2, 1, 0] and again.frame.equals(read.frame) and again.n_unavailable == 0  # from the memo
    assert delete_stored(score_store(ev.context), [cache_key(_FakeJudge.model_key, "a", "query one", "passage a")])
    _, after = run()
    assert judged == [2, 1, 0, 1] and after.scores == read.scores  # the store changed: judged again, not misread


def test_a_summary_is_memoized_under_the_contents_of_what_it_reads(tmp_path: Path, monkeypatch) -> None:
    """Table II's row, the seed spread and the perturbation table draw their bootstraps once per content."""
    import functools

    import harness.session as session

    calls, real = [], session.summarize

    @functools.wraps(real)
    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    ev = Evaluation(Settings(cache_dir=tmp_path / "cache"), load_profile("embedded"))
    monkeypatch.setattr(session, "summarize", counted)
    from fixtures.populations import annotate_population

    planned = pd.DataFrame({"qid": ["q1", "q2"], "pair_id": ["p1", "p2"], "split": "test", "group": ["g1", "g2"],
                            "preferred_pid": ["a", "b"], "counterpart_pid": ["b", "a"], "conflict": False})
    directions = annotate_population(planned, pd.DataFrame({"qid": ["q1", "q1", "q2", "q2"], "pid": ["a", "b"] * 2}))
    outcomes = pd.DataFrame({"qid": ["q1", "q2"], "rank_pos": pd.array([1, 2], dtype="Int64"),
                             "rank_neg": pd.array([2, 1], dtype="Int64"), "strict": [True, False], "tie": False,
                             "fallback": False})
    outcomes.attrs["ranker"] = "mine"  # how a ranker's outcomes name it when no ranker= is passed
    first = ev.summary(outcomes, directions, seed=13)
    again = Evaluation(Settings(cache_dir=tmp_path / "cache"), load_profile("embedded")).summary(
        outcomes.copy(), directions.copy(), seed=13)
    assert calls == [1] and repr(again) == repr(first) and first["strict"] == 1 and first["ranker"] == "mine"
    ev.summary(outcomes.assign(strict=[True, True]), directions, seed=13)
    ev.summary(outcomes, directions, seed=14)
    theirs = outcomes.copy()
    theirs.attrs["ranker"] = "theirs"
    assert ev.summary(theirs, directions, seed=13)["ranker"] == "theirs"  # the same values under another name
    assert len(calls) == 4  # other outcomes, another seed, another ranker: new keys
