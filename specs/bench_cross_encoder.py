"""Cross-encoder speed: the scorer stage against the bare model forward, int8 against fp32, window latency.

Uses the trained embedded cross-encoder when one with the full recipe is cached (its seal
checked), otherwise the untuned SPLADE-tiny backbone with a fresh (seeded) single-logit
head, so the benchmark always runs; which one is recorded in extra_info. Inputs are real
NevIR development texts.

"Raw" is the model alone: the same inputs tokenized beforehand, sorted by length over the
whole set and padded into batches of the scorer's batch size, so it is the best the model
can do. The stage ratios (stage inputs/s over raw inputs/s, target >= 0.8) are
reported from wall time and from process CPU time: the machine is shared, and CPU time is
what other processes disturb least.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable

import numpy as np
import pytest
import torch
from scipy.stats import kendalltau, spearmanr
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from fixtures.artifacts import ArtifactCorrupt
from fixtures.models import splade_tiny_path
from fixtures.settings import Settings
from fixtures.study import build_study
from rankers.scorers.cache import ScoreCache
from rankers.scorers.ce_recipe import BUDGETS
from rankers.scorers.ce_store import load_sealed
from rankers.scorers.ce_training import INFERENCE_INT8, TrainedCrossEncoder
from rankers.scorers.cross_encoder import CrossEncoderScorer
from rankers.scorers.pointwise import score_with_cache
from rankers.window import WINDOW_K

#: One driver chunk of inputs: what the suite hands the scorer per call (scaled down under --benchmark-disable).
N_THROUGHPUT = 2048
N_CHECK = 128
N_QUERIES = 12
ROUNDS = 3


def _trained(settings: Settings) -> TrainedCrossEncoder | None:
    """The cached model trained with the full recipe, if any, whose files still match their seal."""
    root = settings.cache_dir / "models" / "cross-encoder"
    full = json.loads(json.dumps(BUDGETS["full"].__dict__))
    for manifest in sorted(root.glob("*/manifest.json")) if root.exists() else []:
        try:
            m = load_sealed(manifest.parent)
        except ArtifactCorrupt:
            continue
        if m["recipe"] == full:
            return TrainedCrossEncoder(manifest.parent, m, str(m["name"]))
    return None


def _scorer(settings: Settings, int8: bool = False) -> tuple[CrossEncoderScorer, str]:
    """The trained model's CPU scorer (fp32 or int8), else the untuned backbone with a seeded head."""
    trained = _trained(settings)
    if trained is not None:
        return trained.scorer(batch_size=64, device="cpu", int8=int8), trained.name
    torch.manual_seed(0)
    path = splade_tiny_path()
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1).eval()
    if int8:
        model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    return (CrossEncoderScorer.from_model(model, tok, max_length=BUDGETS["full"].max_length, batch_size=64,
                                          name="splade-tiny-untuned", revision="int8" if int8 else "fp32"),
            "untuned SPLADE-tiny backbone, fresh head")


@pytest.fixture(scope="module")
def bench_setup(settings):
    torch.set_num_threads(BUDGETS["full"].threads)
    scorer, label = _scorer(settings)
    study = build_study()
    dev = study.split("development")
    corpus = study.corpus_for("development")
    pids = sorted(corpus)
    rng = np.random.default_rng(0)
    # (qid, pid, query, passage) in the suite's window order: grouped by query, lengths mixed.
    rows = [(str(dev["qid"].iloc[i // WINDOW_K % len(dev)]), pids[j], dev["query"].iloc[i // WINDOW_K % len(dev)],
             corpus[pids[j]]) for i, j in enumerate(rng.choice(len(pids), N_THROUGHPUT, replace=True))]
    windows = [[(dev["query"].iloc[q], corpus[pids[j]]) for j in rng.choice(len(pids), WINDOW_K, replace=False)]
               for q in range(N_QUERIES)]
    return scorer, label, rows, windows


class _Clock:
    """Wall and process-CPU seconds of each call of a function."""

    def __init__(self, fn: Callable[[], object]) -> None:
        self.fn, self.wall, self.cpu = fn, [], []

    def __call__(self) -> object:
        w, c = time.perf_counter(), time.process_time()
        out = self.fn()
        self.cpu.append(time.process_time() - c)
        self.wall.append(time.perf_counter() - w)
        return out


def _raw(scorer: CrossEncoderScorer, inputs: list[tuple[str, str]]) -> _Clock:
    """The bare model forward over the same inputs, globally length-sorted and pre-padded."""
    ids, types, _ = scorer.tokenize(inputs)
    order = np.argsort(-np.array([len(x) for x in ids]), kind="stable")
    batches = []
    for s in range(0, len(order), scorer.batch_size):
        chunk = order[s:s + scorer.batch_size]
        batches.append(scorer.pad([ids[i] for i in chunk], None if types is None else [types[i] for i in chunk]))
    scorer.model.eval()

    def forward() -> None:
        with torch.inference_mode():
            for b in batches:
                scorer.model(**b).logits.float().cpu()

    return _Clock(forward)


def _padding(scorer: CrossEncoderScorer, inputs: list[tuple[str, str]], size: int) -> float:
    """Padded over real tokens when ``score`` gets ``size`` inputs per call in the given order."""
    lengths = np.array([len(x) for x in scorer.tokenize(inputs)[0]])
    padded = 0
    for s in range(0, len(lengths), size):
        part = np.sort(lengths[s:s + size])[::-1]
        padded += sum(int(part[b]) * len(part[b:b + scorer.batch_size]) for b in range(0, len(part), scorer.batch_size))
    return padded / lengths.sum()


def _report(benchmark, stage: _Clock, raw: _Clock, n: int, **extra: object) -> None:
    for _ in range(ROUNDS):
        raw()
    benchmark.extra_info.update({
        "inputs": n, "threads": torch.get_num_threads(),
        "stage_inputs_per_s": n / min(stage.wall), "raw_inputs_per_s": n / min(raw.wall),
        "ratio_wall": min(raw.wall) / min(stage.wall), "ratio_cpu": min(raw.cpu) / min(stage.cpu),
        **extra,
    })


@pytest.mark.benchmark(group="cross-encoder")
def test_scorer_throughput_vs_raw_forward(benchmark, bench_setup):
    """``score`` on one driver chunk in window order: tokenization, length sort, padding, model."""
    scorer, label, rows, _ = bench_setup
    n = N_CHECK if benchmark.disabled else len(rows)
    inputs = [(q, p) for _, _, q, p in rows[:n]]
    stage = _Clock(lambda: scorer.score(inputs))
    result = benchmark.pedantic(stage, rounds=ROUNDS, iterations=1, warmup_rounds=1)
    assert np.isfinite(result.scores).all() and len(result.scores) == n
    if benchmark.disabled:  # --benchmark-disable: executed once as a check, there are no timings to compare
        return
    _report(benchmark, stage, _raw(scorer, inputs), n, model=label, model_key=scorer.model_key,
            batch_size=scorer.batch_size, device=str(scorer.device),
            truncated=int(sum(u["truncated"] for u in result.usage)))


@pytest.mark.benchmark(group="cross-encoder")
def test_scorer_stage_through_the_cache_vs_raw_forward(benchmark, bench_setup, tmp_path):
    """The whole stage as the suite runs it: keys, lookups in an empty cache, the driver's sort and chunks,
    scoring, commits. Also records the padding of the old driver (64 inputs per call in input order)."""
    scorer, label, rows, _ = bench_setup
    n = N_CHECK if benchmark.disabled else len(rows)
    rows = rows[:n]
    caches: list[ScoreCache] = []

    def fresh_cache() -> None:
        """Each round starts from an empty score cache, as a cold run does."""
        caches.append(ScoreCache(tmp_path / f"scores-{len(caches)}.sqlite"))

    stage = _Clock(lambda: score_with_cache(scorer, rows, caches[-1], progress=False))
    result = benchmark.pedantic(stage, setup=fresh_cache, rounds=ROUNDS, iterations=1, warmup_rounds=1)
    for cache in caches:
        cache.close()
    assert result.n_scored == len({(q, p, t) for _, p, q, t in rows}) and result.n_unavailable == 0
    if benchmark.disabled:
        return
    inputs = [(q, p) for _, _, q, p in rows]
    ordered = sorted(inputs, key=lambda x: scorer.sort_key(*x))
    _report(benchmark, stage, _raw(scorer, inputs), n, model=label, chunk_size=scorer.chunk_size,
            padding_driver=_padding(scorer, ordered, scorer.chunk_size),
            padding_input_order_64=_padding(scorer, inputs, 64),
            padding_global_sort=_padding(scorer, inputs, len(inputs)))


@pytest.mark.benchmark(group="cross-encoder")
def test_int8_against_fp32(benchmark, bench_setup, settings):
    """Dynamic int8 (torch.ao quantize_dynamic on the linear layers) vs fp32: speed and rank agreement."""
    fp32, label, rows, _ = bench_setup
    n = N_CHECK if benchmark.disabled else len(rows)
    inputs = [(q, p) for _, _, q, p in rows[:n]]
    int8, _ = _scorer(settings, int8=True)
    q8 = _Clock(lambda: int8.score(inputs))
    got = benchmark.pedantic(q8, rounds=ROUNDS, iterations=1, warmup_rounds=1)
    ref = fp32.score(inputs)
    assert np.isfinite(got.scores).all()
    if benchmark.disabled:
        return
    f32 = _Clock(lambda: fp32.score(inputs))
    for _ in range(ROUNDS):
        f32()
    benchmark.extra_info.update({
        "model": label, "inputs": n, "threads": torch.get_num_threads(), "policy_int8": INFERENCE_INT8,
        "int8_inputs_per_s": n / min(q8.wall), "fp32_inputs_per_s": n / min(f32.wall),
        "speedup_wall": min(f32.wall) / min(q8.wall), "speedup_cpu": min(f32.cpu) / min(q8.cpu),
        "spearman": float(spearmanr(ref.scores, got.scores)[0]),
        "kendall": float(kendalltau(ref.scores, got.scores)[0]),
        "max_abs_diff": float(np.max(np.abs(ref.scores - got.scores))), "fp32_score_std": float(np.std(ref.scores)),
    })


@pytest.mark.benchmark(group="cross-encoder")
def test_window_latency_per_query(benchmark, bench_setup):
    scorer, label, _, windows = bench_setup
    latencies: list[float] = []

    def all_windows() -> None:
        for window in windows:
            t0 = time.perf_counter()
            scorer.score(window)
            latencies.append(time.perf_counter() - t0)

    benchmark.pedantic(all_windows, rounds=2, iterations=1, warmup_rounds=1)
    assert latencies
    if benchmark.disabled:
        return
    lat = np.array(latencies[-2 * len(windows):])
    benchmark.extra_info.update({
        "model": label, "window": WINDOW_K, "queries": len(windows),
        "p50_ms": float(np.percentile(lat, 50) * 1e3), "p95_ms": float(np.percentile(lat, 95) * 1e3),
        "inputs_per_s": WINDOW_K / float(np.mean(lat)),
    })
