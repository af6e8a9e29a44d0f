"""The ``rerankers`` kind against the ``cross_encoder`` kind on the same model folder, same batch size and dtype.

Both stages run as the suite runs them (``score_with_cache``: keys, an empty score cache, the driver's length sort
and chunks, scoring, commits) over the same NevIR development inputs in window order; the folder is the trained
embedded cross-encoder when one is cached, else the SPLADE-tiny backbone with a seeded head saved as a folder (which
one is in extra_info). The ratio (the rerankers stage's seconds over the cross_encoder stage's, from one run: the
machine is shared) must stay within ``MAX_RATIO``: the kind batches the library's pointwise transformer ranker across
queries (``RerankersScorer.batched``) where ``rank`` per query took 2.4x (docs/benchmarks.md). Under
``--benchmark-disable`` both run once on a few inputs and only their scores are compared.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from fixtures.settings import Settings
from fixtures.study import build_study
from rankers.scorers.cache import ScoreCache
from rankers.scorers.pointwise import score_with_cache
from rankers.window import WINDOW_K

#: The most the rerankers stage may take against the cross_encoder stage on the same folder, batch and dtype.
MAX_RATIO = 1.3
BATCH, DTYPE = 64, "float32"
N_INPUTS, N_CHECK, ROUNDS = 2048, 64, 3


def _folder(settings: Settings, tmp: Path) -> tuple[Path, str]:
    """The cached trained embedded cross-encoder's folder, else a seeded head on the SPLADE-tiny backbone."""
    from specs.bench_cross_encoder import _trained  # the same model choice as the cross-encoder benchmark

    trained = _trained(settings)
    if trained is not None:
        return trained.path, trained.name
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from fixtures.models import splade_tiny_path

    torch.manual_seed(0)
    folder = tmp / "splade-tiny-seeded-head"
    AutoModelForSequenceClassification.from_pretrained(splade_tiny_path(), num_labels=1).save_pretrained(folder)
    AutoTokenizer.from_pretrained(splade_tiny_path()).save_pretrained(folder)
    return folder, "untuned SPLADE-tiny backbone, seeded head"


@pytest.fixture(scope="module")
def rows() -> list[tuple[str, str, str, str]]:
    """(qid, pid, query, passage) in window order: each development query with a window's worth of passages."""
    study = build_study()
    dev, corpus = study.split("development"), study.corpus_for("development")
    pids, rng = sorted(corpus), np.random.default_rng(0)
    return [(str(dev["qid"].iloc[i // WINDOW_K % len(dev)]), pids[j], dev["query"].iloc[i // WINDOW_K % len(dev)],
             corpus[pids[j]]) for i, j in enumerate(rng.choice(len(pids), N_INPUTS, replace=True))]


@pytest.mark.benchmark(group="rerankers")
def test_the_rerankers_kind_within_its_ratio_of_the_cross_encoder_kind(benchmark, settings, rows, tmp_path):
    from rankers.scorers.cross_encoder import CrossEncoderScorer
    from rankers.scorers.rerankers_scorer import RerankersScorer

    folder, label = _folder(settings, tmp_path)
    kinds = {"cross_encoder": CrossEncoderScorer(folder, batch_size=BATCH, device="cpu", dtype=DTYPE),
             "rerankers": RerankersScorer(folder, model_type="cross-encoder",
                                          options={"batch_size": BATCH, "dtype": DTYPE, "device": "cpu"})}
    rows = rows[:N_CHECK] if benchmark.disabled else rows
    seconds: dict[str, list[float]] = {name: [] for name in kinds}
    scores: dict[str, np.ndarray] = {}

    def stage(name: str) -> None:
        with ScoreCache(tmp_path / f"{name}-{len(seconds[name])}.sqlite") as cache:  # an empty cache, as cold
            start = time.perf_counter()
            scored = score_with_cache(kinds[name], rows, cache, progress=False)
            seconds[name].append(time.perf_counter() - start)
        scores[name] = np.array([scored.scores[(qid, pid)] for qid, pid, _, _ in rows])

    def both() -> None:  # alternated round by round, so both see the same load
        for name in kinds:
            stage(name)

    benchmark.pedantic(both, rounds=1 if benchmark.disabled else ROUNDS, iterations=1, warmup_rounds=0)
    np.testing.assert_allclose(scores["rerankers"], scores["cross_encoder"], atol=1e-4)  # the same model's logits
    if benchmark.disabled:  # executed once as a check: no timings to compare
        return
    ratio = min(seconds["rerankers"]) / min(seconds["cross_encoder"])
    benchmark.extra_info.update({"model": label, "inputs": len(rows), "batch_size": BATCH, "dtype": DTYPE,
                                 "cross_encoder_s": min(seconds["cross_encoder"]),
                                 "rerankers_s": min(seconds["rerankers"]), "ratio": ratio})
    assert ratio <= MAX_RATIO, (f"the rerankers kind took {ratio:.2f}x the cross_encoder kind's time on the same "
                                f"folder ({label}); at most {MAX_RATIO}x")
