"""Speed of the embedded CPU grader (llama.cpp) on real NevIR Test prompts, and its prompt layout.

- ``test_bench_grader_vs_raw_llama``: ``LLMGrader`` over the ``llamacpp`` backend against raw
  llama.cpp prompt processing of exactly the tokens the grader evaluates (``Llama.eval`` of the same
  chunks after the same reused prefix), rounds alternating in one run. ``raw_over_grader`` is the
  grader's share of raw speed (the target is >= 0.67, i.e. within 1.5x), asserted and reported with
  seconds per judgment, prompt and processed tokens per judgment and the prefix-hit share.
- ``test_bench_window_latency``: one query's 20-passage window with prefix reuse on and off.
- ``test_bench_grader_beside_a_busy_core``: the grader's throughput beside one busy process (a spinning subprocess
  started before and stopped after its rounds, at our priority or niced) over its quiet throughput, rounds
  alternating in one run: the default grader, whose thread count is chosen before each prompt (``cpu_threads``;
  the target is >= 0.8 of quiet), and graders fixed at one thread and at every usable core (the former default)
  for comparison; grades and probabilities identical in every round.
- ``test_bench_prompt_layout``: tokens processed per judgment by each layout (``grade_v1``: query
  first; ``grade_v2``: passage first) with inputs in ``sort_key`` order, for designated-pair inputs
  of a seeded sample of whole Test pairs and for 20-passage windows (BM25 top 20, the suite's lexical
  route, standing in for fusion windows, which need the pools) of a small sample of whole pairs.

Inputs are the designated (preferred, counterpart) passages of whole Test pairs, sorted by
``sort_key`` as the cache driver sorts them. The GGUF is SmolLM2-135M by default; set
``NEVIR_BENCH_GGUF=qwen2.5-coder-1.5b-instruct`` for the 1.5B grader. Environment:
``NEVIR_BENCH_THREADS`` (default 2), ``NEVIR_BENCH_ROUNDS`` (default 2), ``NEVIR_BENCH_PAIRS``
(default 5 pairs = 20 judgments).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

import numpy as np
import pytest

from rankers.scorers.grader import LLMGrader
from rankers.scorers.llm.cpu_threads import usable_cores
from rankers.scorers.llm.llamacpp_backend import LlamaCppBackend

N_THREADS = int(os.environ.get("NEVIR_BENCH_THREADS", "2"))
MODEL_NAME = os.environ.get("NEVIR_BENCH_GGUF", "smollm2-135m-instruct")
ROUNDS = int(os.environ.get("NEVIR_BENCH_ROUNDS", "2"))
N_PAIRS = int(os.environ.get("NEVIR_BENCH_PAIRS", "5"))
WINDOW = 20
LAYOUT_PAIRS, LAYOUT_WINDOW_PAIRS, LAYOUT_SEED = 150, 8, 0


@pytest.fixture(scope="module")
def model(settings):
    """The GGUF under the run's ``--cache-dir`` (a joined model is written there, never to the default cache)."""
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed: the llamacpp grader cannot run")
    from fixtures.gguf import gguf_model
    try:
        return gguf_model(MODEL_NAME, settings.cache_dir)
    except FileNotFoundError as exc:
        pytest.skip(f"GGUF {MODEL_NAME} unavailable: {exc}")


@pytest.fixture(scope="module")
def study(settings):
    from fixtures.study import build_study
    return build_study(settings.data_dir)


def _pair_inputs(study, pair_ids) -> list[tuple[str, str]]:
    """Both directions' (query, preferred) and (query, counterpart) inputs of the given Test pairs."""
    directions = study.split("test")
    corpus = study.corpus_for("test")
    rows = directions[directions["pair_id"].isin(set(pair_ids))]
    return [(row.query, corpus[pid]) for row in rows.itertuples() for pid in (row.preferred_pid, row.counterpart_pid)]


@pytest.fixture(scope="module")
def pair_inputs(study) -> list[tuple[str, str]]:
    pairs = sorted(study.split("test")["pair_id"].unique())[:N_PAIRS]
    return _pair_inputs(study, pairs)


@pytest.fixture(scope="module")
def window_inputs(study) -> list[tuple[str, str]]:
    """One query with its two designated passages and 18 other Test passages (a window-sized batch)."""
    row = study.split("test").iloc[0]
    corpus = study.corpus_for("test")
    others = [pid for pid in sorted(corpus) if pid not in (row.preferred_pid, row.counterpart_pid)][:WINDOW - 2]
    return [(row.query, corpus[pid]) for pid in (row.preferred_pid, row.counterpart_pid, *others)]


def _grader(model, reuse_prefix: bool = True, prompt: str | None = None) -> LLMGrader:
    backend = LlamaCppBackend(model.path, revision=model.sha256, n_threads=N_THREADS, reuse_prefix=reuse_prefix)
    return LLMGrader(backend) if prompt is None else LLMGrader(backend, prompt)


def _plan(grader: LLMGrader, inputs) -> list[tuple[int, tuple[int, ...]]]:
    """(tokens kept, tokens evaluated) per decode call the grader makes for ``inputs`` in order, cold start."""
    backend = grader.backend
    plan, cached = [], []
    for q, p in inputs:
        chunks, _ = backend.chunks(grader.grade_prompt(q, p))
        keep = 0
        while keep < min(len(chunks) - 1, len(cached)) and cached[keep] == chunks[keep]:
            keep += 1
        start = sum(map(len, chunks[:keep]))
        for chunk in chunks[keep:]:
            if chunk:
                plan.append((start, chunk))
            start += len(chunk)
        cached = chunks
    return plan


def _outcome_info(batch) -> dict[str, object]:
    grades = Counter(int(s) for s in batch.scores if np.isfinite(s))
    n = len(batch.errors)
    prompt = float(np.nansum([u["input_tokens"] for u in batch.usage]))
    processed = float(np.nansum([u.get("processed_tokens", np.nan) for u in batch.usage]))
    return {"n": n, "unavailable": sum(e is not None for e in batch.errors),
            "grade_counts": {str(g): grades.get(g, 0) for g in range(5)},
            "near_ties": int(sum(u.get("near_tie", 0) for u in batch.usage)),
            "truncated": int(sum(u["truncated"] for u in batch.usage)),
            "prompt_tokens_per_judgment": prompt / n, "processed_tokens_per_judgment": processed / n,
            "prefix_hit_share": 1 - processed / prompt}


@pytest.mark.llm
@pytest.mark.benchmark(group="grader")
def test_bench_grader_vs_raw_llama(benchmark, model, pair_inputs) -> None:
    grader = _grader(model)
    backend = grader.backend
    inputs = sorted(pair_inputs, key=lambda x: grader.sort_key(*x))  # as the cache driver orders them
    plan = _plan(grader, inputs)
    llm = backend.load()  # load the model outside the timings
    import llama_cpp  # heavy: native runtime, only when this benchmark runs

    def raw_round() -> float:
        start = time.perf_counter()
        for keep, tokens in plan:
            llm.n_tokens = keep
            llm.eval(tokens)
            np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),)).copy()
        return time.perf_counter() - start

    def grader_round():
        backend.reset_prefix()  # every round starts cold, as the raw round does
        return grader.score(inputs)

    raw_times = [raw_round()]
    batch = benchmark.pedantic(grader_round, rounds=ROUNDS, iterations=1)
    assert batch.errors == [None] * len(inputs)  # no unavailable judgment on a healthy model
    assert sum(len(t) for _, t in plan) == sum(u["processed_tokens"] for u in batch.usage)  # same tokens
    if benchmark.disabled:  # --benchmark-disable: executed once as a check, there are no timings to compare
        return
    raw_times.append(raw_round())
    raw_s = float(np.mean(raw_times))
    grader_s = benchmark.stats.stats.mean
    info = _outcome_info(batch)
    benchmark.extra_info.update(info)
    benchmark.extra_info.update({
        "model": model.name, "threads": N_THREADS, "model_key": grader.model_key,
        "seconds_per_judgment": grader_s / len(inputs), "raw_seconds_per_judgment": raw_s / len(inputs),
        "processed_tokens_per_s": info["processed_tokens_per_judgment"] * len(inputs) / grader_s,
        "raw_over_grader": raw_s / grader_s,
    })
    assert raw_s / grader_s >= 0.67, f"grader at {raw_s / grader_s:.2f} of raw llama.cpp speed (needs >= 0.67)"


@pytest.mark.llm
@pytest.mark.benchmark(group="grader")
@pytest.mark.parametrize("reuse_prefix", [True, False], ids=["prefix-reuse", "no-reuse"])
def test_bench_window_latency(benchmark, model, window_inputs, reuse_prefix: bool) -> None:
    if benchmark.disabled and not reuse_prefix:
        pytest.skip("no-reuse is a timing baseline only; reuse vs no reuse grades are compared in "
                    "tests/rankers/scorers/test_llm_llamacpp.py")
    grader = _grader(model, reuse_prefix)
    grader.backend.load()  # load outside the timing

    def window_round():
        grader.backend.reset_prefix()
        return grader.score(sorted(window_inputs, key=lambda x: grader.sort_key(*x)))

    batch = benchmark.pedantic(window_round, rounds=ROUNDS, iterations=1)
    assert len(batch.errors) == WINDOW and batch.errors == [None] * WINDOW
    if benchmark.disabled:  # --benchmark-disable: executed once as a check
        return
    window_s = benchmark.stats.stats.mean
    benchmark.extra_info.update(_outcome_info(batch))
    benchmark.extra_info.update({"model": model.name, "threads": N_THREADS, "window": WINDOW,
                                 "window_latency_s": window_s, "seconds_per_judgment": window_s / WINDOW})


def _layout_cost(grader: LLMGrader, inputs) -> dict[str, float]:
    inputs = sorted(set(inputs), key=lambda x: grader.sort_key(*x))
    plan = _plan(grader, inputs)
    total = sum(sum(map(len, grader.backend.chunks(grader.grade_prompt(q, p))[0])) for q, p in inputs)
    processed = sum(len(t) for _, t in plan)
    return {"n": len(inputs), "prompt_tokens_per_judgment": total / len(inputs),
            "processed_tokens_per_judgment": processed / len(inputs), "prefix_hit_share": 1 - processed / total}


@pytest.mark.llm
@pytest.mark.benchmark(group="grader")
def test_bench_prompt_layout(benchmark, model, study) -> None:
    from rankers.window import WINDOW_K
    from fixtures.routes.bm25 import BM25Route

    rng = np.random.default_rng(LAYOUT_SEED)
    pairs = sorted(rng.choice(sorted(study.split("test")["pair_id"].unique()), LAYOUT_PAIRS, replace=False))
    window_pairs = pairs[:LAYOUT_WINDOW_PAIRS]
    corpus = study.corpus_for("test")
    directions = study.split("test")
    rows = directions[directions["pair_id"].isin(set(window_pairs))]
    hits = BM25Route(depth=WINDOW_K).search(corpus, list(rows["query"]))
    windows = [(q, corpus[h.pid]) for q, hs in zip(rows["query"], hits) for h in hs]
    cases = {"pairs": _pair_inputs(study, pairs), "windows": windows}
    cases["pairs+windows"] = cases["pairs"] + windows

    def measure() -> dict[str, dict[str, float]]:
        out = {}
        for version in ("grade_v1", "grade_v2"):
            grader = _grader(model, prompt=version)
            out[version] = {case: _layout_cost(grader, inputs) for case, inputs in cases.items()}
        return out

    costs = benchmark.pedantic(measure, rounds=1, iterations=1)
    v1, v2 = costs["grade_v1"], costs["grade_v2"]
    # the layout the grader uses must be the cheaper one where the study spends most judgments
    assert v2["pairs"]["processed_tokens_per_judgment"] < v1["pairs"]["processed_tokens_per_judgment"]
    assert v2["pairs+windows"]["processed_tokens_per_judgment"] < v1["pairs+windows"]["processed_tokens_per_judgment"]
    benchmark.extra_info.update({"model": model.name, "pairs": LAYOUT_PAIRS, "window_pairs": LAYOUT_WINDOW_PAIRS,
                                 "windows_from": f"BM25 top {WINDOW_K}", **costs})


_SPIN = "print('spinning', flush=True)\nwhile True:\n    pass\n"


@contextmanager
def _busy_core(nice: int) -> Iterator[None]:
    """One process spinning on a core (``nice``: its niceness over ours) from before the block until after it.

    In a session of its own, as another program is: with the kernel's autogroup scheduling a session's processes
    share that session's part of the CPU, so a spinner in the grader's own session would take from the grader's part
    only (docs/benchmarks.md#the-grader-beside-other-work)."""
    spinner = subprocess.Popen([sys.executable, "-c", f"import os\nos.nice({nice})\n{_SPIN}"], stdout=subprocess.PIPE,
                               text=True, start_new_session=True)
    try:
        assert spinner.stdout.readline().strip() == "spinning"
        yield
    finally:
        spinner.kill()
        spinner.wait()


@pytest.mark.llm
@pytest.mark.benchmark(group="grader-busy")
@pytest.mark.parametrize("nice", [0, 19], ids=["busy-core", "niced-busy-core"])
def test_bench_grader_beside_a_busy_core(benchmark, model, pair_inputs, nice: int) -> None:
    if benchmark.disabled:
        pytest.skip("a timing comparison only; grades whatever the thread count are tested in "
                    "tests/rankers/scorers/test_llm_llamacpp.py")
    cores = len(usable_cores())
    if cores < 2:
        pytest.skip("one usable core: there is no other core for the busy process to take")
    adaptive = LLMGrader(LlamaCppBackend(model.path, revision=model.sha256))
    fixed = LLMGrader(LlamaCppBackend(model.path, revision=model.sha256, n_threads=cores))
    one = LLMGrader(LlamaCppBackend(model.path, revision=model.sha256, n_threads=1))
    inputs = sorted(pair_inputs, key=lambda x: adaptive.sort_key(*x))  # as the cache driver orders them
    for grader in (adaptive, fixed, one):
        grader.score(inputs[:1])  # load the model outside the timings

    def timed(grader: LLMGrader) -> tuple[float, list, list[int]]:
        grader.backend.reset_prefix()
        threads: list[int] = []
        start = time.perf_counter()
        batch = grader.score(inputs, done=lambda i, _: threads.append(grader.backend.threads))
        return time.perf_counter() - start, [(float(s), u["grade_probs"]) for s, u in zip(batch.scores, batch.usage)], \
            threads

    seconds: dict[str, list[float]] = {"quiet": [], "busy": [], "busy_every_core": [], "busy_one_thread": []}
    threads: dict[str, Counter] = {case: Counter() for case in seconds}
    records = []

    def alternation() -> None:
        for case, grader in (("quiet", adaptive), ("busy", adaptive), ("busy_every_core", fixed),
                             ("busy_one_thread", one)):
            with _busy_core(nice) if case != "quiet" else nullcontext():
                s, record, used = timed(grader)
            seconds[case].append(s)
            threads[case].update(used)
            records.append(record)

    benchmark.pedantic(alternation, rounds=ROUNDS, iterations=1)
    assert all(r == records[0] for r in records)  # identical grades and probabilities, whatever the thread count
    mean = {case: float(np.mean(v)) for case, v in seconds.items()}
    quiet_machine = set(threads["quiet"]) == {cores}  # nothing else took a core during the quiet rounds
    benchmark.extra_info.update({
        "model": model.name, "cores": cores, "spinner_nice": nice, "judgments": len(inputs),
        "seconds_per_judgment": {case: m / len(inputs) for case, m in mean.items()},
        **{f"{case}_over_quiet": mean["quiet"] / m for case, m in mean.items() if case != "quiet"},
        "threads": {case: dict(c) for case, c in threads.items()}, "quiet_machine": quiet_machine,
        "loadavg": os.getloadavg()[0]})
    if quiet_machine:  # the target holds against a quiet baseline; on a machine others load, the ratio is reported
        assert mean["quiet"] / mean["busy"] >= 0.8, \
            f"grader at {mean['quiet'] / mean['busy']:.2f} of its quiet throughput beside a busy core (needs >= 0.8)"
