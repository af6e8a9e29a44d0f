"""Is the suite's own client ever the bottleneck of LLM judging? (README "Scale out", the measured figures.)

The suite's request path — ``LLMGrader`` over the OpenAI-compatible backend: prompts built and escaped,
bodies sent over httpx at a concurrency, replies parsed with their top log-probabilities, grades read —
against a loopback stub process (``harness.stub_chat``) that answers at once or after a fixed
latency, at concurrency 1, 8, 64 and 256. The stub's own ceiling at each concurrency (requests per second to
a client costing next to nothing) is measured in the same test, before and after the client's rounds, and the
client's share of it reported (``client_over_ceiling``). Goal: >= 0.9 at concurrency 64 on the latency stub
(asserted when timings are on). ``test_bench_client_time_for_the_paper_run`` adds the score cache (the driver:
lookup, ordering, each judgment committed as it finishes) and projects the client's CPU time for the paper's
60,724 judged responses (goal < 60 s, asserted); ``test_bench_cache_write_per_judgment`` is the cache write alone.

With ``--benchmark-disable`` (CI) each runs once on a few requests as a check that every request is answered
and graded. Environment: ``NEVIR_BENCH_STUB_LATENCY_MS`` (default 100: a short grade from a batched GPU
server), ``NEVIR_BENCH_ROUNDS`` (default 2).
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

from rankers.scorers.base import ScoreBatch
from rankers.scorers.cache import ScoreCache
from rankers.scorers.grader import LLMGrader
from rankers.scorers.judgment_records import store_outcomes
from rankers.scorers.judgments import timed
from rankers.scorers.llm.generation import GenerationSettings
from rankers.scorers.llm.openai_compatible import OpenAIBackend
from rankers.scorers.pointwise import score_outcomes, score_with_cache
from harness.loopback import running
from harness.stub_chat import StubChatServer, ceiling

LATENCY_S = float(os.environ.get("NEVIR_BENCH_STUB_LATENCY_MS", "100")) / 1000
ROUNDS = int(os.environ.get("NEVIR_BENCH_ROUNDS", "2"))
CONCURRENCY = (1, 8, 64, 256)
#: Judged responses of the paper's Qwen3-14B run (window stage).
PAPER_JUDGMENTS = 60_724
PASSAGE = "The committee approved the proposal only after the amendment about funding was removed. " * 4


@pytest.fixture(scope="module")
def stubs():
    with running(StubChatServer(0.0)) as instant, running(StubChatServer(LATENCY_S)) as latency:
        yield {"instant": instant, "latency": latency}


def _grader(server: StubChatServer, concurrency: int) -> LLMGrader:
    settings = GenerationSettings(thinking=False, logprobs=5, concurrency=concurrency, timeout_s=120)
    return LLMGrader(OpenAIBackend(server.base_url, "stub", settings=settings))


def _inputs(n: int) -> list[tuple[str, str]]:
    return [(f"which proposal was approved without funding {i % 40}", f"{i}: {PASSAGE}") for i in range(n)]


def _count(stub: str, concurrency: int, disabled: bool) -> int:
    """Requests per round: enough for the concurrency to fill (8 per slot), and a few when only checking."""
    if disabled:
        return 2 * concurrency + 4
    if stub == "latency":
        return max(20, 8 * concurrency)
    return max(1000, 8 * concurrency)


@pytest.mark.benchmark(group="client")
@pytest.mark.parametrize("concurrency", CONCURRENCY)
@pytest.mark.parametrize("stub", ["instant", "latency"])
def test_bench_client_throughput(benchmark, stubs, stub: str, concurrency: int) -> None:
    server = stubs[stub]
    grader = _grader(server, concurrency)
    inputs = _inputs(_count(stub, concurrency, benchmark.disabled))
    body = json.dumps(grader.backend.request(grader.grade_prompt(*inputs[0]))[0]).encode()
    before = ceiling(server.port, concurrency, len(inputs), body)
    batch = benchmark.pedantic(lambda: grader.score(inputs), rounds=1 if benchmark.disabled else ROUNDS,
                               iterations=1)
    assert batch.errors == [None] * len(inputs) and set(batch.scores) == {3.0}  # every request answered and graded
    assert {u["endpoint"] for u in batch.usage} == {server.base_url}
    if benchmark.disabled:  # --benchmark-disable: executed once as a check, there are no timings to compare
        return
    after = ceiling(server.port, concurrency, len(inputs), body)
    client = len(inputs) / benchmark.stats.stats.mean
    stub_ceiling = (before + after) / 2
    benchmark.extra_info.update({"stub": stub, "latency_ms": LATENCY_S * 1000 if stub == "latency" else 0.0,
                                 "concurrency": concurrency, "requests": len(inputs),
                                 "client_requests_per_s": round(client, 1),
                                 "stub_ceiling_requests_per_s": round(stub_ceiling, 1),
                                 "ceiling_before_after": [round(before, 1), round(after, 1)],
                                 "client_over_ceiling": round(client / stub_ceiling, 3)})
    if stub == "latency" and concurrency == 64:
        assert client / stub_ceiling >= 0.9, f"client at {client / stub_ceiling:.2f} of the stub's ceiling"


@pytest.mark.benchmark(group="client")
def test_bench_client_time_for_the_paper_run(benchmark, stubs, tmp_path: Path) -> None:
    """The whole driver (cache lookup, request path, one commit per chunk) at concurrency 64 on the instant stub:
    client CPU seconds per judgment, projected to the paper's 60,724 judgments."""
    grader = _grader(stubs["instant"], 64)
    n = 200 if benchmark.disabled else 3000
    rows = [(f"q{i % 40}", f"p{i}", q, p) for i, (q, p) in enumerate(_inputs(n))]
    cpu: list[float] = []
    rounds = iter(range(100))

    def judge_all() -> None:
        with ScoreCache(tmp_path / f"scores-{next(rounds)}.sqlite") as cache:
            started = time.process_time()
            scored = score_with_cache(grader, rows, cache, progress=False)
            cpu.append(time.process_time() - started)
        assert scored.n_scored == n and scored.n_unavailable == 0

    benchmark.pedantic(judge_all, rounds=1 if benchmark.disabled else ROUNDS, iterations=1)
    if benchmark.disabled:
        return
    per_judgment = float(np.median(cpu)) / n
    benchmark.extra_info.update({"judgments": n, "client_cpu_ms_per_judgment": round(per_judgment * 1000, 4),
                                 "wall_ms_per_judgment": round(benchmark.stats.stats.mean / n * 1000, 4),
                                 "projected_client_cpu_s_for_60724": round(per_judgment * PAPER_JUDGMENTS, 1)})
    assert per_judgment * PAPER_JUDGMENTS < 60, f"{per_judgment * PAPER_JUDGMENTS:.0f} s of client time"


@pytest.mark.benchmark(group="client")
def test_bench_cache_write_per_judgment(benchmark, tmp_path: Path) -> None:
    """Storing grader results as the driver does (each judgment committed on its own as it finishes, row digests,
    capping; docs/protocol.md#judging-cost)."""
    n = 640 if benchmark.disabled else 6400
    usage = {"input_tokens": 410.0, "output_tokens": 1.0, "latency_s": 0.1, "requests": 1.0, "truncated": 0.0,
             "grade_probs": [0.0, 0.0, 0.1, 0.7, 0.2], "grade_margin": 0.5, "near_tie": 0.0,
             "endpoint": "http://127.0.0.1:8000/v1"}
    (one,) = score_outcomes(ScoreBatch(np.full(1, 3.0), [None], [usage], ["3"]), 1, "bench")
    one = timed(one, 0.0)
    rounds = iter(range(100))
    cpu: list[float] = []

    def write_all() -> None:
        with ScoreCache(tmp_path / f"write-{next(rounds)}.sqlite") as cache:
            started = time.process_time()
            for i in range(n):
                store_outcomes(cache, [("bench", "q" * 64, f"p{i}", "p" * 64)], [one])
            cpu.append(time.process_time() - started)

    benchmark.pedantic(write_all, rounds=1 if benchmark.disabled else ROUNDS, iterations=1)
    if benchmark.disabled:
        return
    per_judgment = benchmark.stats.stats.mean / n
    benchmark.extra_info.update({"judgments": n, "write_ms_per_judgment": round(per_judgment * 1000, 4),
                                 "write_cpu_ms_per_judgment": round(float(np.median(cpu)) / n * 1000, 4),
                                 "projected_s_for_60724": round(per_judgment * PAPER_JUDGMENTS, 1)})
