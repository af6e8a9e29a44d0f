"""Throughput and latency of the pool routes and of fixed fusion on the real Test split.

Encoding benchmarks use a fixed slice of the Test corpus (the first passages by id)
so runs compare like with like; fusion runs over the full frozen Test pool
(2,766 directions; target well under 1 s), built on first use through the
ordinary snapshot cache.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

from fixtures.models import ModelNotFound, minilm_path, splade_tiny_path
from fixtures.settings import Settings
from fixtures.study import build_study

N_PASSAGES = 64
ROUNDS = 3


@pytest.fixture(scope="module")
def study():
    return build_study()


@pytest.fixture(scope="module")
def passages(study) -> list[str]:
    corpus = study.corpus_for("test")
    return [corpus[p] for p in sorted(corpus)[:N_PASSAGES]]


def _need(locate) -> str:
    try:
        return str(locate())
    except ModelNotFound as exc:
        pytest.skip(str(exc))


def _mean_seconds(benchmark) -> float | None:
    """Mean seconds per round, or None when benchmarking is disabled (--benchmark-disable)."""
    return None if benchmark.stats is None else float(benchmark.stats.stats.mean)


@pytest.mark.benchmark(group="pool-build")
def test_bench_dense_encoding_route_vs_raw(benchmark, passages) -> None:
    from fixtures.routes.dense import DenseRoute, load_encoder

    route = DenseRoute(_need(minilm_path), show_progress=False)
    raw = load_encoder(route.model)
    raw.encode(passages[:4])  # warm-up outside both timings
    raw_times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        expected = raw.encode(passages, batch_size=route.batch_size, normalize_embeddings=True)
        raw_times.append(time.perf_counter() - start)
    got = benchmark.pedantic(route.encode, args=(passages,), rounds=ROUNDS, iterations=1)
    assert np.allclose(got, expected, atol=1e-5)
    mean = _mean_seconds(benchmark)
    raw_mean = float(np.mean(raw_times))
    benchmark.extra_info.update({"passages": len(passages), "raw_passages_per_s": len(passages) / raw_mean})
    if mean is not None:
        benchmark.extra_info.update({"route_passages_per_s": len(passages) / mean,
                                     "route_over_raw_time_ratio": mean / raw_mean})


@pytest.mark.benchmark(group="pool-build")
def test_bench_sparse_encoding(benchmark, passages) -> None:
    from fixtures.routes.sparse import SparseRoute

    route = SparseRoute(_need(splade_tiny_path), show_progress=False)
    route.encode(passages[:2])  # load the model outside the timing
    matrix = benchmark.pedantic(route.encode, args=(passages,), rounds=ROUNDS, iterations=1)
    assert matrix.shape[0] == len(passages) and matrix.nnz > 0
    mean = _mean_seconds(benchmark)
    benchmark.extra_info.update({"passages": len(passages), "mean_nonzeros": matrix.nnz / len(passages)})
    if mean is not None:
        benchmark.extra_info["passages_per_s"] = len(passages) / mean


@pytest.mark.benchmark(group="pool-build")
def test_bench_bm25_query_latency(benchmark, study) -> None:
    from fixtures.routes.bm25 import BM25Route

    corpus = study.corpus_for("test")
    queries = list(study.split("test")["query"][:100])
    route = BM25Route()
    route.search(corpus, queries[:1])  # build the in-memory index outside the timing
    hits = benchmark(route.search, corpus, queries)
    assert len(hits) == len(queries) and all(hits)
    mean = _mean_seconds(benchmark)
    benchmark.extra_info["queries"] = len(queries)
    if mean is not None:
        benchmark.extra_info["ms_per_query"] = 1000 * mean / len(queries)


@pytest.fixture(scope="module")
def test_pool(study, settings: Settings):
    from fixtures.pools import build_pool

    _need(minilm_path), _need(splade_tiny_path)
    return build_pool(study, "test", settings)


@pytest.mark.slow
@pytest.mark.benchmark(group="pool-build")
def test_bench_load_frozen_test_pool(benchmark, study, settings: Settings, test_pool) -> None:
    """Reading an existing snapshot: identity (model digests cached), parquet read, digest check, validation."""
    from fixtures.pools import build_pool

    snap = benchmark.pedantic(build_pool, args=(study, "test", settings), rounds=ROUNDS, iterations=1)
    assert snap.path == test_pool.path and snap.frame.equals(test_pool.frame)
    benchmark.extra_info.update({"rows": len(snap.frame), "directions": snap.manifest["direction_count"]})


@pytest.mark.slow
@pytest.mark.benchmark(group="fusion")
def test_bench_fusion_all_test_pools(benchmark, test_pool) -> None:
    from rankers.fusion import fusion_scores

    pool = test_pool.frame
    scores = benchmark(fusion_scores, pool)
    assert scores.shape == (len(pool),) and np.isfinite(scores).all()
    benchmark.extra_info.update({"directions": int(pool["qid"].nunique()), "rows": len(pool), "target_s": 1.0})
