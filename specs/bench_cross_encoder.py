"""Cross-encoder speed: scorer throughput vs the bare model forward, and per-query window latency.

Uses the trained embedded cross-encoder when one is cached, otherwise the untuned
SPLADE-tiny backbone with a fresh (seeded) single-logit head, so the benchmark always
runs; which one is recorded in extra_info. Inputs are real NevIR development texts.
"""
from __future__ import annotations

import json
import time

import numpy as np
import pytest
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from fixtures.models import splade_tiny_path
from fixtures.settings import Settings
from fixtures.study import build_study
from rankers.scorers.ce_training import BUDGETS, TrainedCrossEncoder
from rankers.scorers.cross_encoder import CrossEncoderScorer
from rankers.window import WINDOW_K

N_THROUGHPUT = 240
N_QUERIES = 12


def _scorer(settings: Settings) -> tuple[CrossEncoderScorer, str]:
    """The cached trained model with the full recipe if present, else the untuned backbone."""
    root = settings.cache_dir / "models" / "cross-encoder"
    full = json.loads(json.dumps(BUDGETS["full"].__dict__))
    for manifest in sorted(root.glob("*/manifest.json")) if root.exists() else []:
        m = json.loads(manifest.read_text())
        if m["recipe"] == full:
            trained = TrainedCrossEncoder(manifest.parent, m, m["name"])
            return trained.scorer(batch_size=64), m["name"]
    torch.manual_seed(0)
    path = splade_tiny_path()
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1)
    return CrossEncoderScorer.from_model(model, tok, max_length=BUDGETS["full"].max_length, batch_size=64,
                                         name="splade-tiny-untuned"), "untuned SPLADE-tiny backbone, fresh head"


@pytest.fixture(scope="module")
def bench_setup(settings):
    torch.set_num_threads(BUDGETS["full"].threads)
    scorer, label = _scorer(settings)
    study = build_study()
    dev = study.split("development")
    passages = list(study.corpus_for("development").values())
    rng = np.random.default_rng(0)
    inputs = [(dev["query"].iloc[i % len(dev)], passages[j])
              for i, j in enumerate(rng.choice(len(passages), N_THROUGHPUT, replace=False))]
    windows = [[(dev["query"].iloc[q], passages[j]) for j in rng.choice(len(passages), WINDOW_K, replace=False)]
               for q in range(N_QUERIES)]
    return scorer, label, inputs, windows


def _raw_seconds(scorer: CrossEncoderScorer, inputs, rounds: int = 3) -> float:
    """Best time of the bare model forward over the same length-sorted, pre-padded batches."""
    ids, types, _ = scorer.tokenize(inputs)
    order = np.argsort(-np.array([len(x) for x in ids]), kind="stable")
    batches = []
    for s in range(0, len(order), scorer.batch_size):
        chunk = order[s:s + scorer.batch_size]
        batches.append(scorer.pad([ids[i] for i in chunk], None if types is None else [types[i] for i in chunk]))
    scorer.model.eval()
    best = float("inf")
    with torch.inference_mode():
        for _ in range(rounds):
            t0 = time.perf_counter()
            for b in batches:
                scorer.model(**b).logits.float().cpu()
            best = min(best, time.perf_counter() - t0)
    return best


@pytest.mark.benchmark(group="cross-encoder")
def test_scorer_throughput_vs_raw_forward(benchmark, bench_setup):
    scorer, label, inputs, _ = bench_setup
    result = benchmark.pedantic(scorer.score, args=(inputs,), rounds=3, iterations=1, warmup_rounds=1)
    assert np.isfinite(result.scores).all()
    if benchmark.disabled:  # --benchmark-disable: executed once as a check, there are no timings to compare
        return
    scorer_s = benchmark.stats.stats.min
    raw_s = _raw_seconds(scorer, inputs)
    benchmark.extra_info.update({
        "model": label, "model_key": scorer.model_key, "inputs": len(inputs), "batch_size": scorer.batch_size,
        "threads": torch.get_num_threads(), "device": str(scorer.device),
        "scorer_inputs_per_s": len(inputs) / scorer_s, "raw_inputs_per_s": len(inputs) / raw_s,
        "overhead_ratio": scorer_s / raw_s,
        "truncated": int(sum(u["truncated"] for u in result.usage)),
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
