"""Throughput of the pool routes against their raw models, and latency of fixed fusion, on the real Test split.

Each route is timed against the plain batched computation of the same texts in the same
process, rounds interleaved (the raw round runs as the route round's setup), so a busy
machine slows both alike: sentence-transformers ``encode`` in batches of 32 for dense, a
length-sorted 32-text SPLADE forward with the full vocabulary head for sparse, the bare
FTS5 statement for BM25. ``throughput_vs_raw`` (raw seconds / route seconds, best rounds)
must reach 0.8. Queries are the first Test queries, searched against a fixed slice of the
Test corpus (the first passages by id) encoded before timing. Fusion runs over the full
frozen Test pool (2,766 directions; target well under 1 s), built on first use through
the ordinary snapshot cache. With ``--benchmark-disable`` (CI) each runs once on a small
slice, as a smoke test.
"""
from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import pytest

from fixtures.models import ModelNotFound, minilm_path, splade_tiny_path
from fixtures.settings import Settings
from fixtures.study import build_study

N_QUERIES, N_PASSAGES = 512, 128
SMOKE_QUERIES, SMOKE_PASSAGES = 24, 12
ROUNDS = 3
MIN_RATIO = 0.8


@pytest.fixture(scope="module")
def study():
    return build_study()


@pytest.fixture
def texts(study, benchmark) -> tuple[list[str], dict[str, str]]:
    """(queries, corpus slice) at the measured sizes, or a smoke-test slice when benchmarking is disabled."""
    n_queries, n_passages = (SMOKE_QUERIES, SMOKE_PASSAGES) if benchmark.disabled else (N_QUERIES, N_PASSAGES)
    corpus = study.corpus_for("test")
    queries = list(dict.fromkeys(study.split("test").sort_values("qid", kind="mergesort")["query"]))[:n_queries]
    return queries, {p: corpus[p] for p in sorted(corpus)[:n_passages]}


def _need(locate) -> str:
    try:
        return str(locate())
    except ModelNotFound as exc:
        pytest.skip(str(exc))


def _route_vs_raw(benchmark, route: Callable[[], object], raw: Callable[[], object], n: int, unit: str) -> object:
    """Time ``route`` with ``raw`` run (and timed) before each round; record both rates and their ratio."""
    raw_seconds: list[float] = []

    def raw_round() -> None:
        start = time.perf_counter()
        raw()
        raw_seconds.append(time.perf_counter() - start)

    out = benchmark.pedantic(route, setup=raw_round, rounds=ROUNDS, iterations=1)
    benchmark.extra_info[unit] = n
    if not benchmark.disabled:
        route_best, raw_best = float(benchmark.stats.stats.min), min(raw_seconds)
        ratio = raw_best / route_best
        benchmark.extra_info.update({f"route_{unit}_per_s": n / route_best, f"raw_{unit}_per_s": n / raw_best,
                                     "throughput_vs_raw": ratio})
        assert ratio >= MIN_RATIO, f"route reaches {ratio:.2f} of the raw model's throughput (needs {MIN_RATIO})"
    return out


def _raw_splade(texts: list[str], model_path: str, batch_size: int = 32) -> list[np.ndarray]:
    """Plain batched SPLADE: length-sorted batches padded to their longest, full head, masked max-pooling."""
    import torch

    from fixtures.routes.sparse import MAX_LENGTH, _load

    tokenizer, model = _load(model_path)
    order = np.argsort([len(t) for t in texts], kind="stable")
    out = []
    for start in range(0, len(texts), batch_size):
        enc = tokenizer([texts[i] for i in order[start:start + batch_size]], padding=True, truncation=True,
                        max_length=MAX_LENGTH, return_tensors="pt")
        with torch.inference_mode():
            logits = model(**enc).logits.masked_fill(enc["attention_mask"].unsqueeze(-1) == 0, float("-inf"))
            out.append(torch.log1p(torch.relu(logits.max(dim=1).values)).numpy())
    return out


@pytest.mark.benchmark(group="pool-routes")
def test_bench_dense_search_vs_raw_encode(benchmark, texts) -> None:
    from fixtures.routes.dense import DenseRoute, load_encoder

    queries, corpus = texts
    route = DenseRoute(_need(minilm_path))
    raw = load_encoder(route.model)
    route.search(corpus, queries[:2])  # passages encoded, model warm: neither is timed
    hits = _route_vs_raw(benchmark, lambda: route.search(corpus, queries),
                         lambda: raw.encode(queries, batch_size=32, normalize_embeddings=True), len(queries), "queries")
    assert len(hits) == len(queries) and all(len(h) == min(route.depth, len(corpus)) for h in hits)


@pytest.mark.benchmark(group="pool-routes")
def test_bench_dense_passages_vs_raw_encode(benchmark, texts) -> None:
    from fixtures.routes.dense import DenseRoute, load_encoder

    passages = list(texts[1].values())
    route = DenseRoute(_need(minilm_path))
    raw = load_encoder(route.model)
    route.encode(passages[:2])
    got = _route_vs_raw(benchmark, lambda: route.encode(passages),
                        lambda: raw.encode(passages, batch_size=32, normalize_embeddings=True), len(passages), "passages")
    plain = raw.encode(passages[:8], normalize_embeddings=True)
    assert np.abs(got[:8] - plain).max() < 1e-5  # the same vectors, batched otherwise


@pytest.mark.benchmark(group="pool-routes")
def test_bench_sparse_search_vs_raw_forward(benchmark, texts) -> None:
    from fixtures.routes.sparse import SparseRoute

    queries, corpus = texts
    route = SparseRoute(_need(splade_tiny_path))
    route.search(corpus, queries[:2])
    hits = _route_vs_raw(benchmark, lambda: route.search(corpus, queries),
                         lambda: _raw_splade(queries, route.model), len(queries), "queries")
    assert len(hits) == len(queries) and any(hits)


@pytest.mark.benchmark(group="pool-routes")
def test_bench_sparse_passages_vs_raw_forward(benchmark, texts) -> None:
    from fixtures.routes.sparse import SparseRoute

    passages = list(texts[1].values())
    route = SparseRoute(_need(splade_tiny_path))
    route.encode(passages[:2])
    matrix = _route_vs_raw(benchmark, lambda: route.encode(passages),
                           lambda: _raw_splade(passages, route.model), len(passages), "passages")
    assert matrix.shape[0] == len(passages) and matrix.nnz > 0
    benchmark.extra_info["mean_nonzeros"] = matrix.nnz / len(passages)


@pytest.mark.benchmark(group="pool-routes")
def test_bench_bm25_search_vs_raw_fts5(benchmark, study, texts) -> None:
    from fixtures.routes.bm25 import BM25Route, match_expression

    queries = texts[0]
    corpus = study.corpus_for("test")
    route = BM25Route()
    db = route.index(corpus)  # built outside the timing
    expressions = [e for e in map(match_expression, queries) if e is not None]
    statement = "SELECT pid, -bm25(docs) AS s FROM docs WHERE docs MATCH ? ORDER BY s DESC, pid ASC LIMIT ?"
    hits = _route_vs_raw(benchmark, lambda: route.search(corpus, queries),
                         lambda: [db.execute(statement, (e, route.depth)).fetchall() for e in expressions],
                         len(queries), "queries")
    assert len(hits) == len(queries) and all(hits)


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
