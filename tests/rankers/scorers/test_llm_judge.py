"""The listwise and pairwise judges on their shared base: one key layout, one call path, one usage record."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from rankers.scorers.judgment_records import Request
from rankers.scorers.listwise import ListwiseJudge
from rankers.scorers.llm.generation import Generation
from rankers.scorers.pairwise import PairwiseJudge


class InProcess:
    """A llama.cpp-like backend: its own ``complete`` / ``choose`` calls, streaming, and an engine key."""

    settings = SimpleNamespace(output_cap=77)
    chunk_size = 5

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def key_with(self, engine: dict) -> str:
        return "engine:" + ",".join(f"{k}={engine[k]}" for k in sorted(engine))

    def complete(self, prompts, done=None):
        self.calls.append(("complete", None))
        out = [Generation("[2] > [1]", 10, 4, 0.5, extra={"processed_tokens": 7}) for _ in prompts]
        for i, g in enumerate(out):
            if done is not None:
                done(i, g)
        return out

    def choose(self, prompts, choices, done=None):
        self.calls.append(("choose", tuple(choices)))
        out = [Generation("B", 10, 0, 0.25, choice_probs=(0.25, 0.75)) for _ in prompts]
        for i, g in enumerate(out):
            if done is not None:
                done(i, g)
        return out


class Server:
    """A server-like backend: ``generate`` only, no streaming, keyed by its own model key."""

    model_key = "server:m"
    chunk_size = 3
    settings = SimpleNamespace(output_cap=9)

    def generate(self, prompts):
        return [Generation("A", 12, 1, 1.0) for _ in prompts]


PAIR = Request("q", (("p1", "first passage"), ("p2", "second passage")))


def test_the_key_is_judge_engine_prompt_budgets_and_reading_in_that_order() -> None:
    listwise = ListwiseJudge(InProcess(), passage_tokens=99, query_tokens=11)
    assert listwise.model_key == ("llm-listwise|engine:chunks=head|slot|...,max_tokens=77,use=greedy-permutation"
                                  f"|prompt={listwise.template.key}|budget=p99,q11|perm1")
    pairwise = PairwiseJudge(Server())
    assert pairwise.model_key == f"llm-pairwise|server:m|prompt={pairwise.template.key}|budget=p320,q128|choice1"


def test_in_process_calls_stream_every_outcome_and_a_server_generates_in_chunks_of_its_own() -> None:
    backend = InProcess()
    seen: list[int] = []
    (permutation,) = ListwiseJudge(backend).judge([PAIR], done=lambda i, o: seen.append(i))
    (choice,) = PairwiseJudge(backend).judge([PAIR], done=lambda i, o: seen.append(i))
    assert backend.calls == [("complete", None), ("choose", ("A", "B"))] and seen == [0, 0]
    assert permutation.result == [1, 0] and choice.result == 1
    assert choice.usage["choice_probs"] == [0.25, 0.75]
    assert permutation.usage == {"input_tokens": 10, "output_tokens": 4, "latency_s": 0.5, "requests": 1,
                                 "truncated": 0, "processed_tokens": 7.0, "duplicates": 0, "out_of_range": 0,
                                 "missing": 0}
    assert (ListwiseJudge(backend).chunk_size, PairwiseJudge(backend).chunk_size) == (1, 8)
    server = PairwiseJudge(Server())
    assert server.chunk_size == 3 and server.judge([PAIR], done=lambda i, o: seen.append(i))[0].result == 0
    assert seen == [0, 0]  # a backend without ``done`` commits at the end of its call


def test_a_judge_refuses_a_template_of_the_other_kind() -> None:
    with pytest.raises(ValueError, match="prp_v1.*listwise template"):
        ListwiseJudge(Server(), "prp_v1")
    with pytest.raises(ValueError, match="rankgpt_v1.*pairwise template"):
        PairwiseJudge(Server(), "rankgpt_v1")
