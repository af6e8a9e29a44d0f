"""Window reranking rules on hand-made rankings (docs/protocol.md#window-rule; paper §IV shared procedure)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rankers.base import Ranking
from rankers.scorers.base import ScoreBatch
from rankers.scorers.cache import ScoreCache
from rankers.scorers.pointwise import score_with_cache
from rankers.window import TextInput, pair_inputs, window_inputs, window_rerank


def ranking(name: str, rows: list[tuple[str, str, float]]) -> Ranking:
    """A single-score ranking whose list positions are exactly the given row order per qid."""
    frame = pd.DataFrame(rows, columns=["qid", "pid", "k0"])
    frame["rank"] = frame.groupby("qid").cumcount() + 1
    frame["k1"] = 0.0
    frame["k2"] = 0.0
    return Ranking(name, frame[["qid", "pid", "rank", "k0", "k1", "k2"]])


FUSION = ranking("fusion", [
    ("q1", "a", 0.9), ("q1", "b", 0.8), ("q1", "c", 0.7), ("q1", "d", 0.6), ("q1", "e", 0.5),
    # equal fusion scores, listed y before x, and a tail listed e2 before d2 with equal scores
    ("q2", "y", 0.5), ("q2", "x", 0.5), ("q2", "z", 0.4), ("q2", "e2", 0.1), ("q2", "d2", 0.1),
])


def rows_of(r: Ranking, qid: str) -> list[tuple[str, int, float, float, float]]:
    f = r.frame[r.frame["qid"] == qid].sort_values("rank")
    return [(p, int(k), float(a), float(b), float(c)) for p, k, a, b, c in
            zip(f["pid"], f["rank"], f["k0"], f["k1"], f["k2"])]


def test_head_by_text_then_fusion_then_pid_and_tail_keeps_reference_order():
    scores = {("q1", "a"): 1.0, ("q1", "b"): 3.0, ("q1", "c"): 3.0,
              ("q2", "y"): 2.0, ("q2", "x"): 2.0, ("q2", "z"): 5.0}
    out = window_rerank(FUSION, scores, k=3, name="ce")
    assert out.name == "ce" and out.fallback == frozenset()
    # b/c tie on text -> fusion decides (b .8 > c .7); a has the lowest text score.
    assert rows_of(out, "q1") == [("b", 1, 1, 3.0, 0.8), ("c", 2, 1, 3.0, 0.7), ("a", 3, 1, 1.0, 0.9),
                                  ("d", 4, 0, 0.0, 0.6), ("e", 5, 0, 0.0, 0.5)]
    # x/y tie on text and fusion -> pid asc sets positions, but their keys stay equal (a tie, never a success);
    # the tail keeps the reference's e2-before-d2 order although their keys are equal.
    assert rows_of(out, "q2") == [("z", 1, 1, 5.0, 0.4), ("x", 2, 1, 2.0, 0.5), ("y", 3, 1, 2.0, 0.5),
                                  ("e2", 4, 0, 0.0, 0.1), ("d2", 5, 0, 0.0, 0.1)]
    assert out.info["tie_breaker"] == "fusion" and out.info["k"] == 3


def test_any_missing_or_non_finite_head_score_falls_back_to_reference_order_and_keys():
    base = {("q1", "a"): 1.0, ("q1", "b"): 3.0, ("q1", "c"): 2.0,
            ("q2", "y"): 1.0, ("q2", "x"): 2.0, ("q2", "z"): 5.0}
    for q, bad in (("q1", {("q1", "c"): np.nan}), ("q1", {("q1", "a"): np.inf}), ("q2", {("q2", "z"): -np.inf})):
        out = window_rerank(FUSION, {**base, **bad}, k=3)
        assert out.fallback == frozenset({q})
        ref = rows_of(FUSION, q)
        assert rows_of(out, q) == ref  # reference order and keys (k0=fusion, 0, 0)
        other = "q2" if q == "q1" else "q1"
        assert rows_of(out, other)[0][2] == 1  # the other query is still reranked
        assert set(out.frame["qid"]) == {"q1", "q2"}  # fallback queries stay in the evaluation
    missing = dict(base)
    del missing[("q2", "x")]
    out = window_rerank(FUSION, missing, k=3)
    assert out.fallback == frozenset({"q2"}) and out.info["n_fallback"] == 1
    # A score outside the head is irrelevant: tail passages never need one.
    assert window_rerank(FUSION, base, k=3).fallback == frozenset()
    assert window_rerank(FUSION, {}, k=3).fallback == frozenset({"q1", "q2"})


def test_auxiliary_tie_breaker_changes_only_grade_ties():
    e0 = ranking("E0", [("q1", "d", 9.0), ("q1", "c", 4.0), ("q1", "b", 3.0), ("q1", "a", 2.0), ("q1", "e", 1.0),
                        ("q2", "d2", 9.0), ("q2", "e2", 8.0), ("q2", "x", 1.0), ("q2", "y", 2.0), ("q2", "z", 3.0)])
    scores = {("q1", "a"): 1.0, ("q1", "b"): 3.0, ("q1", "c"): 3.0,
              ("q2", "y"): 2.0, ("q2", "x"): 2.0, ("q2", "z"): 5.0}
    out = window_rerank(FUSION, scores, k=3, name="aux", tie_breaker=e0)
    # E0 prefers c over b; window membership (a, b, c) and tail (d, e with fusion keys) stay from fusion.
    assert rows_of(out, "q1") == [("c", 1, 1, 3.0, 4.0), ("b", 2, 1, 3.0, 3.0), ("a", 3, 1, 1.0, 2.0),
                                  ("d", 4, 0, 0.0, 0.6), ("e", 5, 0, 0.0, 0.5)]
    assert [r[0] for r in rows_of(out, "q2")] == ["z", "y", "x", "e2", "d2"]
    assert out.info["tie_breaker"] == "E0"
    # fallback still restores the *reference* (fusion), not the tie-breaker
    fb = window_rerank(FUSION, {**scores, ("q1", "a"): np.nan}, k=3, tie_breaker=e0)
    assert rows_of(fb, "q1") == rows_of(FUSION, "q1")


def test_bad_inputs_raise_clear_errors():
    scores = {("q1", p): 1.0 for p in "abc"}
    partial = ranking("E0", [("q1", "a", 1.0), ("q1", "b", 1.0)])
    with pytest.raises(ValueError, match="tie-breaker 'E0' lacks head candidates"):
        window_rerank(FUSION, scores, k=3, tie_breaker=partial)
    multi = Ranking("win", FUSION.frame.assign(k1=1.0))
    with pytest.raises(ValueError, match="not a single-score ranking"):
        window_rerank(multi, scores, k=3)
    with pytest.raises(ValueError, match="k must be >= 1"):
        window_rerank(FUSION, scores, k=0)


def test_short_pool_and_large_k():
    out = window_rerank(FUSION, {("q1", p): s for p, s in zip("abcde", [1, 2, 3, 4, 5])} |
                        {("q2", p): 0.0 for p in ["y", "x", "z", "e2", "d2"]}, k=20)
    assert [r[0] for r in rows_of(out, "q1")] == ["e", "d", "c", "b", "a"]
    # all-equal text scores: fusion desc, then pid asc
    assert [r[0] for r in rows_of(out, "q2")] == ["x", "y", "z", "d2", "e2"]


def test_window_inputs_and_pair_inputs():
    queries = {"q1": "who?", "q2": "what?"}
    corpus = {p: f"text {p}" for p in ["a", "b", "c", "d", "e", "x", "y", "z", "d2", "e2"]}
    got = window_inputs(FUSION, queries, corpus, k=2)
    assert got == [TextInput("q1", "a", "who?", "text a"), TextInput("q1", "b", "who?", "text b"),
                   TextInput("q2", "y", "what?", "text y"), TextInput("q2", "x", "what?", "text x")]
    with pytest.raises(KeyError, match="no query text"):
        window_inputs(FUSION, {"q1": "who?"}, corpus, k=2)
    with pytest.raises(KeyError, match="not in the corpus"):
        window_inputs(FUSION, queries, {"a": "t"}, k=2)
    directions = pd.DataFrame({"qid": ["q1"], "query": ["who?"], "preferred_pid": ["c"], "counterpart_pid": ["a"],
                               "split": ["test"]})
    assert pair_inputs(directions, corpus) == [TextInput("q1", "c", "who?", "text c"),
                                               TextInput("q1", "a", "who?", "text a")]
    with pytest.raises(KeyError, match="absent from the corpus"):
        pair_inputs(directions.assign(counterpart_pid="nope"), corpus)


class SpyScorer:
    """Records exactly what a scorer is handed; scores by passage length."""

    model_key = "spy-v1"

    def __init__(self) -> None:
        self.seen: list[object] = []

    def score(self, inputs):
        self.seen.extend(inputs)
        return ScoreBatch(np.array([float(len(p)) for _, p in inputs]), [None] * len(inputs))


def test_scorer_sees_only_query_and_passage_text(tmp_path):
    queries = {"q1": "who?", "q2": "what?"}
    corpus = {p: f"passage body {p}" for p in ["a", "b", "c", "d", "e", "x", "y", "z", "d2", "e2"]}
    directions = pd.DataFrame({"qid": ["q1", "q2"], "query": ["who?", "what?"], "preferred_pid": ["c", "x"],
                               "counterpart_pid": ["d", "y"], "pair_id": ["P1", "P1"], "label": [1, 1]})
    inputs = window_inputs(FUSION, queries, corpus, k=3) + pair_inputs(directions, corpus)
    spy = SpyScorer()
    with ScoreCache(tmp_path / "s.sqlite") as cache:
        res = score_with_cache(spy, inputs, cache, batch_size=2, progress=False)
    # Every handed item is exactly (query text, passage text); no id, pair or label travels with it.
    assert all(isinstance(item, tuple) and len(item) == 2 for item in spy.seen)
    assert all(isinstance(t, str) for item in spy.seen for t in item)
    handed = {t for item in spy.seen for t in item}
    assert handed <= set(queries.values()) | set(corpus.values())
    for forbidden in ["q1", "q2", "P1", "c", "x", "1"]:
        assert forbidden not in handed
    # window (6) + pair (4) inputs, of which (q1, c) and (q2, x), (q2, y) are shared: 7 unique, each scored once
    assert len(spy.seen) == len(set(spy.seen)) == 7 and res.n_unique == 7
    out = window_rerank(FUSION, res.scores, k=3)
    assert out.fallback == frozenset()



def _random_case(seed: int) -> tuple[Ranking, Ranking, dict, pd.DataFrame]:
    """Random single-score reference and tie-breaker over 6 queries of 4-9 passages, coarse scores (many ties)."""
    rng = np.random.default_rng(seed)
    rows, tie_rows, dirs = [], [], []
    for q in range(6):
        n = int(rng.integers(4, 10))
        pids = [f"p{q}-{j}" for j in range(n)]
        ref = np.round(rng.random(n), 1)
        order = np.lexsort((pids, -ref))
        rows += [(f"q{q}", pids[j], ref[j]) for j in order]
        tie = np.round(rng.random(n), 1)
        tie_order = np.lexsort((pids, -tie))
        tie_rows += [(f"q{q}", pids[j], tie[j]) for j in tie_order]
        a, b = rng.choice(n, 2, replace=False)
        dirs.append((f"q{q}", pids[a], pids[b]))
    reference, tie_breaker = ranking("fusion", rows), ranking("e0", tie_rows)
    scores = {(q, p): float(rng.integers(0, 3)) for q, p, _ in rows}
    scores[(dirs[0][0], dirs[0][1])] = float("nan")  # one unavailable designated score
    directions = pd.DataFrame(dirs, columns=["qid", "preferred_pid", "counterpart_pid"])
    return reference, tie_breaker, scores, directions


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("with_tie_breaker", [False, True])
def test_designated_outcomes_equal_the_window_rule(seed: int, with_tie_breaker: bool):
    """Strict, tie and fallback from the designated pair alone equal the full window's when only a designated
    score is unavailable (the case both modes see)."""
    from reports.outcomes import direction_outcomes
    from rankers.window import designated_outcomes

    reference, tie_breaker, scores, directions = _random_case(seed)
    tb = tie_breaker if with_tie_breaker else None
    designated = designated_outcomes(reference, scores, directions, k=3, tie_breaker=tb)
    window = window_rerank(reference, scores, k=3, tie_breaker=tb)
    annotated = directions.assign(pair_id=directions["qid"], split="test", group="g", conflict=False, covered=True,
                                  eligible=True, complete=False)
    full = direction_outcomes(window, annotated)
    assert designated["qid"].tolist() == full["qid"].tolist()
    for column in ("strict", "tie", "fallback"):
        assert designated[column].tolist() == full[column].tolist(), column
    assert designated["rank_pos"].isna().all() and designated["rank_neg"].isna().all()


def test_designated_mode_differs_from_the_window_only_where_another_passage_is_unscored():
    """q1: the window falls back for c, a passage neither direction designates; designated mode, which never sees
    c's score, decides by the designated scores. q2: every score available: the two modes agree."""
    from reports.outcomes import direction_outcomes
    from rankers.window import designated_outcomes

    scores = {("q1", "a"): 1.0, ("q1", "b"): 3.0, ("q1", "c"): np.nan,
              ("q2", "y"): 1.0, ("q2", "x"): 4.0, ("q2", "z"): 5.0}
    directions = pd.DataFrame({"qid": ["q1", "q2"], "preferred_pid": ["b", "x"], "counterpart_pid": ["a", "y"]})
    window = window_rerank(FUSION, scores, k=3)
    annotated = directions.assign(pair_id=directions["qid"], split="test", group="g", conflict=False, covered=True,
                                  eligible=True, complete=False)
    full = direction_outcomes(window, annotated).set_index("qid")
    designated = designated_outcomes(FUSION, scores, directions, k=3).set_index("qid")
    # q1, window: fusion order and keys (a .9 above b .8): the preferred b loses; counted as a fallback.
    assert window.fallback == frozenset({"q1"})
    assert (full.at["q1", "strict"], full.at["q1", "fallback"]) == (False, True)
    # q1, designated: b 3.0 above a 1.0 by text: a success, and no (designated) fallback.
    assert (designated.at["q1", "strict"], designated.at["q1", "fallback"]) == (True, False)
    # q2: both modes read x 4.0 above y 1.0.
    assert full.at["q2", "strict"] and designated.at["q2", "strict"]
    assert not full.at["q2", "fallback"] and not designated.at["q2", "fallback"]
