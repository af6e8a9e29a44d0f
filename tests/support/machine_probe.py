"""What one machine computes from the same inputs, for ``tests/fixtures/test_other_machines.py``.

Run as ``python -m tests.support.machine_probe OUT [--texts N] [--train CACHE]`` in a process whose
environment emulates another machine (kernel family, thread count, OpenBLAS core type, numpy's SIMD
dispatch). It writes to OUT: the dense embeddings and SPLADE vectors of the first N passages of the
Train+Validation corpus, and (``--train``: from the pool snapshots already in CACHE) the digest of the
Train/development pool features and of the E0 and N=8 models trained on them, so the test can compare
machines artifact by artifact, in pipeline order.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

from fixtures.settings import Settings, cpu_kernels, pin_cpu_kernels

pin_cpu_kernels()  # as the suite's conftest does, before torch loads; an explicit environment value wins


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--texts", type=int, default=96)
    parser.add_argument("--train", type=Path, default=None, help="cache dir holding the pool snapshots")
    args = parser.parse_args(argv)
    import numpy as np
    import scipy.sparse as sp
    import torch

    if os.environ.get("PROBE_TORCH_THREADS"):
        torch.set_num_threads(int(os.environ["PROBE_TORCH_THREADS"]))
    from fixtures.routes.dense import DenseRoute
    from fixtures.routes.sparse import SparseRoute
    from fixtures.study import build_study

    args.out.mkdir(parents=True, exist_ok=True)
    study = build_study()
    corpus = study.corpora["trainval"]
    texts = [corpus[p] for p in sorted(corpus)[:args.texts]]
    np.save(args.out / "dense.npy", DenseRoute(cache_dir=None).encode(texts))
    sp.save_npz(args.out / "sparse.npz", SparseRoute(cache_dir=None).encode(texts))
    from numpy.lib.introspect import opt_func_info

    record = {"cpu_kernels": cpu_kernels(), "torch_capability": torch.backends.cpu.get_cpu_capability(),
              "torch_threads": torch.get_num_threads(),
              "numpy_log_dispatch": opt_func_info(func_name="log", signature="float64")["log"]["dd"]["current"]}
    if args.train is not None:
        record["training"] = _training(study, Settings(cache_dir=args.train))
    (args.out / "record.json").write_text(json.dumps(record, indent=1, sort_keys=True), encoding="utf-8")


def _training(study, settings) -> dict[str, str]:
    """Digests of the Train/development features and of the E0 and N=8 models, trained into a private folder."""
    import tempfile

    import numpy as np

    from fixtures.pools import build_pool
    from fixtures.populations import annotate_population
    from rankers.features import pool_features
    from rankers.lambdamart import train_ranker

    pools = {s: build_pool(study, s, settings).frame for s in ("train", "development")}
    queries = {q: t for s in ("train", "development") for q, t in zip(study.split(s)["qid"], study.split(s)["query"])}
    corpus = study.corpora["trainval"]
    out: dict[str, str] = {}
    for split, pool in pools.items():
        pool = pool.sort_values(["qid", "pid"], kind="mergesort").reset_index(drop=True)
        features = np.ascontiguousarray(pool_features(pool, queries, corpus), dtype=np.float64)
        out[f"features:{split}"] = hashlib.sha256(features.tobytes()).hexdigest()
    directions = {s: annotate_population(study.split(s), pools[s]) for s in pools}
    with tempfile.TemporaryDirectory() as models:
        for background in (0, 8):
            trained = train_ranker(background, pools["train"], directions["train"], pools["development"],
                                   directions["development"], queries, corpus, Path(models))
            text = (trained.path / "model.txt").read_bytes()
            out[f"model:{'e0' if background == 0 else f'bg{background}'}"] = hashlib.sha256(text).hexdigest()
    return out


if __name__ == "__main__":
    sys.exit(main())
