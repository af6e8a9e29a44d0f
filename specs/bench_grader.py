"""Throughput and window latency of the embedded CPU grader (llama.cpp) on real NevIR Test prompts.

Compares ``LLMGrader`` over the ``llamacpp`` backend with llama.cpp's own
``Llama.create_chat_completion`` on the same prompts in the same run (the ratio isolates the
grader's own overhead: rendering, ordering, parsing), and times one query's 20-passage window
with prefix reuse on and off. The GGUF is SmolLM2-135M by default; set
``NEVIR_BENCH_GGUF=qwen2.5-coder-1.5b-instruct`` for the 1.5B model. Parse failures and the grade
distribution of the measured outputs go into ``extra_info`` with the timings; ``prompt_tokens``
counts every prompt token, including those served from the reused KV prefix.
Environment: ``NEVIR_BENCH_THREADS`` (default 2), ``NEVIR_BENCH_ROUNDS`` (default 2).
"""
from __future__ import annotations

import os
import time
from collections import Counter

import numpy as np
import pytest

from rankers.scorers.grader import LLMGrader
from rankers.scorers.llm_backends import LlamaCppBackend

N_DIRECTIONS = 10  # 20 (query, passage) inputs: each direction's preferred and counterpart passage
WINDOW = 20
N_THREADS = int(os.environ.get("NEVIR_BENCH_THREADS", "2"))
MODEL_NAME = os.environ.get("NEVIR_BENCH_GGUF", "smollm2-135m-instruct")
ROUNDS = int(os.environ.get("NEVIR_BENCH_ROUNDS", "2"))


@pytest.fixture(scope="module")
def model():
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed: the llamacpp grader cannot run")
    from fixtures.gguf import gguf_model
    try:
        return gguf_model(MODEL_NAME)
    except FileNotFoundError as exc:
        pytest.skip(f"GGUF {MODEL_NAME} unavailable: {exc}")


@pytest.fixture(scope="module")
def study():
    from fixtures.study import build_study
    return build_study()


@pytest.fixture(scope="module")
def pair_inputs(study) -> list[tuple[str, str]]:
    """Preferred and counterpart passage of the first Test directions (fixed, real NevIR text)."""
    directions = study.split("test").head(N_DIRECTIONS)
    corpus = study.corpus_for("test")
    return [(row.query, corpus[pid]) for row in directions.itertuples()
            for pid in (row.preferred_pid, row.counterpart_pid)]


@pytest.fixture(scope="module")
def window_inputs(study) -> list[tuple[str, str]]:
    """One query with its two designated passages and 18 other Test passages (a window-sized batch)."""
    row = study.split("test").iloc[0]
    corpus = study.corpus_for("test")
    others = [pid for pid in sorted(corpus) if pid not in (row.preferred_pid, row.counterpart_pid)][:WINDOW - 2]
    return [(row.query, corpus[pid]) for pid in (row.preferred_pid, row.counterpart_pid, *others)]


def _grader(model, reuse_prefix: bool = True) -> LLMGrader:
    return LLMGrader(LlamaCppBackend(model.path, revision=model.sha256, n_threads=N_THREADS, reuse_prefix=reuse_prefix))


def _outcome_info(batch) -> dict[str, object]:
    grades = Counter(int(s) for s in batch.scores if np.isfinite(s))
    failures = [e for e in batch.errors if e is not None]
    return {"n": len(batch.errors), "parse_failures": len(failures),
            "failure_examples": [r for r, e in zip(batch.raw, batch.errors) if e is not None][:5],
            "grade_counts": {str(g): grades.get(g, 0) for g in range(5)},
            "prompt_tokens": float(np.nansum([u["input_tokens"] for u in batch.usage])),
            "output_tokens": float(np.nansum([u["output_tokens"] for u in batch.usage]))}


@pytest.mark.llm
@pytest.mark.benchmark(group="grader")
def test_bench_grader_vs_raw_llama(benchmark, model, pair_inputs) -> None:
    grader = _grader(model)
    backend = grader.backend
    messages = [grader.messages(q, p) for q, p in pair_inputs]
    llm = backend.load(messages)  # load the model and size the context outside the timings

    def raw_round() -> float:
        start = time.perf_counter()
        for m in messages:
            llm.create_chat_completion(messages=m, temperature=backend.temperature, max_tokens=backend.max_tokens,
                                       seed=backend.seed, stop=backend.stop or None)
        return time.perf_counter() - start

    # raw rounds before and after the grader's, so drifting machine load hits both sides alike
    raw_times = [raw_round() for _ in range(ROUNDS)]
    batch = benchmark.pedantic(grader.score, args=(pair_inputs,), rounds=ROUNDS, iterations=1)
    assert len(batch.errors) == len(pair_inputs)
    assert all(e is None or e.startswith("parse:") for e in batch.errors)  # no backend failure on a healthy model
    if benchmark.disabled:  # --benchmark-disable: executed once as a check, there are no timings to compare
        return
    raw_times += [raw_round() for _ in range(ROUNDS)]
    raw_s = float(np.mean(raw_times))
    grader_s = benchmark.stats.stats.mean
    info = _outcome_info(batch)
    benchmark.extra_info.update(info)
    benchmark.extra_info.update({
        "model": model.name, "threads": N_THREADS, "model_key": grader.model_key,
        "grades_per_s": len(pair_inputs) / grader_s, "raw_grades_per_s": len(pair_inputs) / raw_s,
        "prompt_tokens_per_s": info["prompt_tokens"] / grader_s, "grader_over_raw_time": grader_s / raw_s,
    })


@pytest.mark.llm
@pytest.mark.benchmark(group="grader")
@pytest.mark.parametrize("reuse_prefix", [True, False], ids=["prefix-reuse", "no-reuse"])
def test_bench_window_latency(benchmark, model, window_inputs, reuse_prefix: bool) -> None:
    grader = _grader(model, reuse_prefix)
    grader.backend.load([grader.messages(q, p) for q, p in window_inputs])  # load outside the timing
    batch = benchmark.pedantic(grader.score, args=(window_inputs,), rounds=ROUNDS, iterations=1)
    assert len(batch.errors) == WINDOW
    if benchmark.disabled:  # --benchmark-disable: executed once as a check
        return
    window_s = benchmark.stats.stats.mean
    info = _outcome_info(batch)
    benchmark.extra_info.update(info)
    benchmark.extra_info.update({"model": model.name, "threads": N_THREADS, "window": len(window_inputs),
                                 "window_latency_s": window_s, "grades_per_s": len(window_inputs) / window_s,
                                 "prompt_tokens_per_s": info["prompt_tokens"] / window_s})
