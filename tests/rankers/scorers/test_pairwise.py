"""The pairwise judge on hand-written answers: PRP's both-order comparisons, all-pair wins with 0.5 per
inconsistent pair, sliding bubble passes, judgment reuse and fallback (expectations computed by hand)."""
from __future__ import annotations

import math

import pytest

from rankers.scorers.cache import ScoreCache
from rankers.scorers.judgments import drive, scored_inputs
from rankers.scorers.llm.generation import Generation
from rankers.scorers.pairwise import PairwiseJudge, allpair, choice_probs_from_logprobs, parse_choice, sliding
from tests.support.scripted_llm import ScriptedBackend


@pytest.mark.parametrize("text, choice", [
    ("A", 0), ("B", 1), (" b. ", 1), ("Passage A", 0), ("Answer: B", 1), ("**A**", 0), ("Output: Passage B", 1),
    ("<think>A looks right, or B</think>\nA", 0), ("A and B", None), ("C", None), ("", None), (None, None),
    ("Passage A is more relevant", None), ("<think>unfinished", None),
])
def test_answers_are_read_strictly_after_any_thinking_block(text, choice):
    got, reason = parse_choice(text)
    assert got == choice and (reason is None) == (choice is not None)


def test_letter_probabilities_come_from_the_answer_tokens_alternatives():
    tokens = (("Passage", -0.1, {}), (" B", math.log(0.6), {" A": math.log(0.2), " B": math.log(0.6), "C": -1.0}))
    p_a, p_b = choice_probs_from_logprobs(tokens)
    assert (p_a, p_b) == pytest.approx((0.25, 0.75))
    assert choice_probs_from_logprobs((("Hmm", -0.1, {}),)) is None


# Hand-written model: the relevance of passage "pN" is N, except that pairs involving p2 are answered "A"
# whatever the order (position bias): (p2, x) -> A and (x, p2) -> A, so every pair with p2 is inconsistent.
def _biased(query: str, passages: list[str]) -> str:
    a, b = (int(p.split()[-1]) for p in passages)
    if 2 in (a, b):
        return "A"
    return "A" if a > b else "B"


def _items(n: int) -> list[tuple[str, str]]:
    return [(f"p{i}", f"passage {i}") for i in range(1, n + 1)]


def test_allpair_scores_wins_with_half_a_win_per_inconsistent_pair(tmp_path):
    backend = ScriptedBackend(_biased)
    with ScoreCache(tmp_path / "s.sqlite") as cache:
        driven = drive(PairwiseJudge(backend), cache, {("q", "main"): allpair("query", _items(4), window=4)})
    result = driven.results[("q", "main")]
    # Pairs: (1,2) inc, (1,3) 3 wins, (1,4) 4 wins, (2,3) inc, (2,4) inc, (3,4) 4 wins.
    # p1: 0.5; p2: 1.5; p3: 1 + 0.5 = 1.5; p4: 2 + 0.5 = 2.5.
    assert result.scores == {"p1": 0.5, "p2": 1.5, "p3": 1.5, "p4": 2.5}
    assert result.counts == {"judgments": 12.0, "pairs": 6.0, "inconsistent": 3.0}
    assert result.order[0] == "p4" and result.order[-1] == "p1"
    assert len(backend.asked) == 12 and len(driven.calls) == 12


def test_allpair_on_a_partial_window_puts_the_rest_below_in_reference_order(tmp_path):
    with ScoreCache(tmp_path / "s.sqlite") as cache:
        result = drive(PairwiseJudge(ScriptedBackend(_biased)), cache,
                       {("q", "main"): allpair("query", _items(5), window=2)}).results[("q", "main")]
    assert result.scores == {"p1": 0.5, "p2": 0.5, "p3": -3.0, "p4": -4.0, "p5": -5.0}  # a tie: the tie-breaker's


def test_sliding_swaps_only_on_a_consistent_win_and_reuses_repeated_comparisons(tmp_path):
    backend = ScriptedBackend(_biased)
    with ScoreCache(tmp_path / "s.sqlite") as cache:
        driven = drive(PairwiseJudge(backend), cache, {("q", "main"): sliding("query", _items(4), window=4, passes=2)})
    result = driven.results[("q", "main")]
    # Pass 1 (bottom up): (p4 vs p3) p4 wins -> p1 p2 p4 p3; (p4 vs p2) inconsistent, keep; (p2 vs p1)
    # inconsistent, keep -> p1 p2 p4 p3. Pass 2 (down to position 2): (p3 vs p4) p4 stays; (p4 vs p2) inconsistent.
    assert result.order == ("p1", "p2", "p4", "p3")
    assert result.scores == {"p1": -1.0, "p2": -2.0, "p4": -3.0, "p3": -4.0}
    # Five comparisons of three distinct pairs ({p3,p4} and {p2,p4} twice), two of them inconsistent.
    assert result.counts == {"judgments": 10.0, "pairs": 3.0, "inconsistent": 2.0}
    assert len(driven.calls) == 10 and driven.calls["key"].nunique() == 6  # a recurring comparison: judged once
    assert len(backend.asked) == 6


def test_designated_pair_both_orders_and_a_failed_comparison_falls_back(tmp_path):
    pair = [("pref", "passage 3"), ("counter", "passage 1")]
    with ScoreCache(tmp_path / "s.sqlite") as cache:
        ok = drive(PairwiseJudge(ScriptedBackend(_biased)), cache, {("q", "main"): allpair("query", pair, 20)})
        dead = drive(PairwiseJudge(ScriptedBackend(lambda q, ps: None, name="dead")), cache,
                     {("q", "main"): allpair("query", pair, 20)})
    assert ok.results[("q", "main")].scores == {"pref": 1.0, "counter": 0.0}
    assert len(ok.calls) == 2  # two judgments per designated pair: (pref, counter) and (counter, pref)
    assert dead.results[("q", "main")].scores is None
    assert "connection refused" in dead.results[("q", "main")].error


def test_the_llama_cpp_choice_probabilities_are_stored_with_the_judgment():
    outcome = PairwiseJudge.outcome(Generation("B", 300, 0, 0.5, choice_probs=(0.3, 0.7),
                                                extra={"processed_tokens": 40.0}))
    assert outcome.result == 1 and outcome.usage["choice_probs"] == [0.3, 0.7]
    assert outcome.usage["processed_tokens"] == 40.0 and outcome.usage["input_tokens"] == 300


def test_windows_and_calls_reach_the_window_rule_view(tmp_path):
    inputs = [("q", pid, "query", text) for pid, text in _items(3)]
    judge = PairwiseJudge(ScriptedBackend(_biased))
    with ScoreCache(tmp_path / "s.sqlite") as cache:
        scored = scored_inputs(inputs, drive(judge, cache, {("q", "main"): allpair("query", _items(3), 20)}),
                               judge.model_key)
    # (1,2) inc, (1,3) p3, (2,3) inc: p1 0.5, p2 1.0, p3 1.5
    assert scored.scores == {("q", "p1"): 0.5, ("q", "p2"): 1.0, ("q", "p3"): 1.5}
    assert scored.windows.iloc[0][["calls", "pairs", "inconsistent"]].tolist() == [6, 3.0, 2.0]
    assert scored.n_unique == 6 and scored.n_scored == 6
