"""Pointwise judges on the one judging protocol: keys, the stored record, and the loop shared with listwise judges."""
from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest

from rankers.scorers.base import ScoreBatch
from rankers.scorers.cache import CachedScore, ScoreCache
from rankers.scorers.judgment_records import Outcome, Request, WindowResult, read_stored, request_key, store_outcomes
from rankers.scorers.judgments import drive
from rankers.scorers.pointwise import PointwiseJudge, score_outcomes, score_with_cache


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class LengthScorer:
    """Scores len(passage); NaN for a passage named "broken"; records every call."""

    model_key = "length-v1"

    def __init__(self) -> None:
        self.calls: list[list[tuple[str, str]]] = []

    def score(self, inputs):
        self.calls.append(list(inputs))
        scores = np.array([math.nan if p == "broken" else float(len(p)) for _, p in inputs])
        return ScoreBatch(scores, [None] * len(inputs), [{"seconds": 0.5} for _ in inputs], [None] * len(inputs))


def test_a_one_passage_request_is_keyed_by_its_pid_and_both_texts_digests() -> None:
    # Hand-written: the pointwise key is (model key, sha256 of the query, the pid, sha256 of the passage); a request
    # of two passages is keyed by the ordered pids' and texts' digests, so the two forms never meet.
    one = Request("who wrote it", (("p7", "a passage"),))
    assert request_key("m", one) == ("m", sha("who wrote it"), "p7", sha("a passage"))
    two = Request("who wrote it", (("p7", "a passage"), ("p8", "another")))
    key = request_key("m", two)
    assert key[:2] == ("m", sha("who wrote it")) and key[2] == "2:" + sha("p7\x1fp8")
    assert key[3] == sha(sha("a passage") + "\x1f" + sha("another"))


def test_a_score_is_stored_as_the_rows_score_and_any_other_reading_beside_it(tmp_path) -> None:
    with ScoreCache(tmp_path / "scores.sqlite") as cache:
        keys = [("m", "q", "p1", "t1"), ("m", "q", "p2", "t2"), ("m", "q", "2:x", "y")]
        stored = store_outcomes(cache, keys, [Outcome(2.5, None, {"seconds": 1.0}, "2.5", False),
                                              Outcome(math.nan, "non-finite score", {}, None, False),
                                              Outcome((1, 0), None, {"latency_s": 0.1}, "[2] > [1]", False)])
        found, _ = cache.lookup(keys)
    assert found[keys[0]] == CachedScore(2.5, None, {"seconds": 1.0}, "2.5")  # the score, no "result" beside it
    assert found[keys[1]].score is None and found[keys[1]].error == "non-finite score"
    assert found[keys[2]].score == 1.0 and found[keys[2]].usage["result"] == [1, 0]
    # Read back, each is the outcome it was stored from (a permutation comes back as JSON's list).
    assert [read_stored(found[k]).result for k in (keys[0], keys[2])] == [2.5, [1, 0]]
    assert math.isnan(read_stored(found[keys[1]]).result) and not read_stored(found[keys[1]]).available
    assert [o.available for o in stored] == [True, False, True] and not any(o.cached for o in stored)


def test_a_non_finite_score_is_unavailable_with_its_cause_and_a_reserved_usage_key_is_refused() -> None:
    batch = ScoreBatch(np.array([1.0, np.inf]), [None, None], [{}, {}], [])
    ok, bad = score_outcomes(batch, 2, "m")
    assert ok == Outcome(1.0, None, {}, None, False)
    assert math.isnan(bad.result) and bad.error == "non-finite score" and bad.usage == {"cause": "non-finite score"}
    with pytest.raises(ValueError, match="'m' returned 2 scores / 2 errors for 3 inputs"):
        score_outcomes(batch, 3, "m")
    with pytest.raises(ValueError, match="usage may not hold the key 'result'"):
        score_outcomes(ScoreBatch(np.array([1.0]), [None], [{"result": 3}]), 1, "m")


def test_pointwise_and_window_algorithms_share_one_loop_one_key_and_one_record(tmp_path) -> None:
    """Judgments score_with_cache made are what ``drive`` reads for the same one-passage requests, and the reverse:
    one key, one stored record, nothing judged twice."""
    scorer = LengthScorer()
    inputs = [("q1", "a", "query", "xx"), ("q1", "b", "query", "broken"), ("q2", "a", "query", "xx")]
    with ScoreCache(tmp_path / "scores.sqlite") as cache:
        scored = score_with_cache(scorer, inputs, cache, progress=False)
        assert scorer.calls == [[("query", "xx"), ("query", "broken")]]  # the repeated input is judged once
        assert scored.frame["score"].tolist()[::2] == [2.0, 2.0] and scored.n_unavailable == 1
        assert scored.frame["usage"][0] == {"seconds": 0.5, "wall_s": scored.frame["usage"][0]["wall_s"]}

        def window(passages):
            outcomes = yield [Request("query", (p,)) for p in passages]
            return WindowResult({pid: o.result for (pid, _), o in zip(passages, outcomes)})

        driven = drive(PointwiseJudge(scorer), cache, {("q1", "main"): window([("a", "xx"), ("b", "broken"),
                                                                                 ("c", "xyz")])})
    # "a" is read; "broken" was stored unavailable, so it is judged again; "c" is new.
    assert scorer.calls[1:] == [[("query", "broken"), ("query", "xyz")]]
    scores = driven.results[("q1", "main")].scores
    assert scores["a"] == 2.0 and scores["c"] == 3.0 and math.isnan(scores["b"])
    assert driven.n_judged == 2 and driven.n_retried == 1
