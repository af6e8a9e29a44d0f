"""The shared text-score cache: reuse, partial rescoring, unavailability, concurrency, interruption."""
from __future__ import annotations

import multiprocessing as mp

import numpy as np
import pytest

from fixtures.settings import Settings
from rankers.scorers.base import ScoreBatch
from rankers.scorers.cache import CacheIncompleteError, ScoreCache, cache_key, score_with_cache


class CountingScorer:
    """Deterministic scorer (len(query) + len(passage)) that records every input it is asked for."""

    def __init__(self, model_key: str = "count-v1", fail_on: set[str] = frozenset(), raise_on_call: int | None = None):
        self.model_key = model_key
        self.fail_on = set(fail_on)
        self.raise_on_call = raise_on_call
        self.calls: list[list[tuple[str, str]]] = []

    def score(self, inputs):
        self.calls.append(list(inputs))
        if self.raise_on_call is not None and len(self.calls) == self.raise_on_call:
            raise RuntimeError("scorer crashed")
        scores = np.array([np.nan if p in self.fail_on else float(len(q) * 100 + len(p)) for q, p in inputs])
        errors = ["timeout" if p in self.fail_on else None for _, p in inputs]
        usage = [{"input_tokens": float(len(q) + len(p))} for q, p in inputs]
        return ScoreBatch(scores, errors, usage, [f"raw:{p}" for _, p in inputs])

    @property
    def seen(self) -> list[tuple[str, str]]:
        return [x for call in self.calls for x in call]


def make_inputs(n: int, qid: str = "q") -> list[tuple[str, str, str, str]]:
    return [(f"{qid}{i % 3}", f"p{i}", f"query {i % 3}", "passage " + "x" * i) for i in range(n)]


@pytest.fixture
def cache(tmp_path):
    with ScoreCache(tmp_path / "scores.sqlite") as c:
        yield c


def test_scores_are_aligned_and_a_rerun_scores_nothing(cache):
    inputs = make_inputs(10)
    first = CountingScorer()
    res = score_with_cache(first, inputs, cache, batch_size=3, progress=False)
    assert res.n_scored == 10 and res.n_cached == 0 and [len(c) for c in first.calls] == [3, 3, 3, 1]
    assert res.frame["score"].tolist() == [7.0 * 100 + 8 + i for i in range(10)]
    assert res.frame["usage"][2] == {"input_tokens": 7.0 + 10} and res.frame["raw"][0] == "raw:passage "
    again = CountingScorer()
    res2 = score_with_cache(again, inputs, cache, batch_size=3, progress=False)
    assert again.calls == [] and res2.n_scored == 0 and res2.n_cached == 10
    assert res2.frame["score"].tolist() == res.frame["score"].tolist() and res2.frame["cached"].all()
    assert res2.scores[("q1", "p4")] == 712.0


def test_duplicates_are_scored_once(cache):
    inputs = make_inputs(4)
    # the same text input under another qid (e.g. pair-only and window, or a repeated query) shares the score
    dup = inputs + [inputs[0], ("other-qid", inputs[1][1], inputs[1][2], inputs[1][3])]
    scorer = CountingScorer()
    res = score_with_cache(scorer, dup, cache, batch_size=10, progress=False)
    assert len(scorer.seen) == 4 and res.n_unique == 4 and len(res.frame) == 6
    assert res.frame["score"].iloc[5] == res.frame["score"].iloc[1]


def test_deleting_half_rescores_exactly_that_half(cache):
    inputs = make_inputs(12)
    score_with_cache(CountingScorer(), inputs, cache, progress=False)
    gone = inputs[::2]
    assert cache.delete(cache_key("count-v1", p, q, t) for _, p, q, t in gone) == 6
    scorer = CountingScorer()
    res = score_with_cache(scorer, inputs, cache, batch_size=4, progress=False)
    assert sorted(scorer.seen) == sorted((q, t) for _, _, q, t in gone)
    assert res.n_scored == 6 and res.frame["cached"].tolist() == [i % 2 == 1 for i in range(12)]


def test_key_covers_model_and_texts(cache):
    inputs = make_inputs(3)
    score_with_cache(CountingScorer(), inputs, cache, progress=False)
    other_model = CountingScorer("count-v2")
    score_with_cache(other_model, inputs, cache, progress=False)
    assert len(other_model.seen) == 3
    # same pid and query, edited passage text: a new input
    edited = CountingScorer()
    score_with_cache(edited, [(*inputs[0][:3], inputs[0][3] + " edited")], cache, progress=False)
    assert edited.seen == [(inputs[0][2], inputs[0][3] + " edited")]
    assert cache.count() == 7 and cache.model_keys() == ["count-v1", "count-v2"]


def test_unavailable_results_are_stored_and_retried_only_when_asked(cache):
    inputs = make_inputs(6)
    bad = {inputs[1][3], inputs[4][3]}
    res = score_with_cache(CountingScorer(fail_on=bad), inputs, cache, progress=False)
    assert res.n_unavailable == 2 and res.frame["error"].tolist()[1] == "timeout"
    assert np.isnan(res.frame["score"][4])
    again = CountingScorer()
    assert score_with_cache(again, inputs, cache, progress=False).n_unavailable == 2 and again.calls == []
    retry = CountingScorer()
    res = score_with_cache(retry, inputs, cache, progress=False, retry_unavailable=True)
    assert sorted(retry.seen) == sorted((inputs[i][2], inputs[i][3]) for i in (1, 4))
    assert res.n_unavailable == 0 and res.frame["error"].isna().all()


def test_non_finite_scores_become_unavailable_with_a_reason(cache):
    class Inf(CountingScorer):
        def score(self, inputs):
            return ScoreBatch(np.array([np.inf] * len(inputs)), [None] * len(inputs))
    res = score_with_cache(Inf(), make_inputs(2), cache, progress=False)
    assert res.frame["score"].isna().all() and res.frame["error"].tolist() == ["non-finite score"] * 2


def test_cache_only_rebuilds_or_says_how_much_is_missing(cache):
    inputs = make_inputs(8)
    score_with_cache(CountingScorer(), inputs[:5], cache, progress=False)
    never = CountingScorer()
    with pytest.raises(CacheIncompleteError, match="3 of 8 unique inputs are not in"):
        score_with_cache(never, inputs, cache, cache_only=True, progress=False)
    res = score_with_cache(never, inputs[:5], cache, cache_only=True, progress=False)
    assert never.calls == [] and res.n_cached == 5


def test_a_scorer_raising_mid_run_keeps_earlier_batches(cache):
    inputs = make_inputs(10)
    crashing = CountingScorer(raise_on_call=3)
    with pytest.raises(RuntimeError, match="scorer crashed"):
        score_with_cache(crashing, inputs, cache, batch_size=3, progress=False)
    assert cache.count("count-v1") == 6
    resume = CountingScorer()
    res = score_with_cache(resume, inputs, cache, batch_size=3, progress=False)
    assert len(resume.seen) == 4 and res.n_cached == 6


def test_misaligned_batches_are_refused(cache):
    class Short(CountingScorer):
        def score(self, inputs):
            return ScoreBatch(np.zeros(len(inputs) - 1), [None] * (len(inputs) - 1))
    with pytest.raises(ValueError, match="returned 2 scores / 2 errors for 3 inputs"):
        score_with_cache(Short(), make_inputs(3), cache, progress=False)
    assert cache.count() == 0


def _writer(path: str, worker: int, out) -> None:
    with ScoreCache(path) as c:
        # overlapping inputs: every worker scores the shared 0..29 plus 10 of its own
        inputs = make_inputs(30) + [(f"w{worker}", f"own{worker}-{i}", "q", f"t{worker}-{i}") for i in range(10)]
        res = score_with_cache(CountingScorer(), inputs, c, batch_size=4, progress=False)
        out.put((worker, int(res.frame["score"].notna().sum())))


def test_concurrent_writers_share_one_cache(tmp_path):
    path = str(tmp_path / "shared.sqlite")
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(path, w, out)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    assert sorted(out.get(timeout=5) for _ in procs) == [(w, 40) for w in range(4)]
    with ScoreCache(tmp_path / "shared.sqlite") as c:
        assert c.count("count-v1") == 30 + 4 * 10


def test_settings_location(tmp_path):
    with ScoreCache.for_settings(Settings(cache_dir=tmp_path)) as c:
        assert c.path == tmp_path / "scores" / "text_scores.sqlite"
        assert c._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
