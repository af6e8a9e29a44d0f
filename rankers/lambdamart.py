"""Learned full-pool rankers: LambdaMART on pairs (E0) or with N background candidates (``docs/protocol.md#lambdamart``).

Every variant is a LightGBM ``lambdarank`` model over the 38 pool features of
``rankers.features``, computed on each query's complete pool, scoring the whole pool at
inference. Variants differ only in which rows enter the loss, set by ``n_background``:

- ``e0`` (``n_background = 0``): the two designated passages of each eligible Train direction,
  labels 1/0; background candidates shape the features but carry no label;
- ``bg<N>`` (``n_background = N > 0``; the paper's N=8 is ``bg8``): the same pair plus up to N
  background candidates sampled without replacement from the rest of the query's pool with a
  per-query seed (derived from the base seed and a stable hash of the qid, recorded in the
  manifest), labels 2/1/0 with gains [0, 1, 2]. A query with fewer than N background candidates
  takes all it has.

Eligibility (training and development): both designated passages are pool rows of
that qid and the direction is not a structural conflict (``fixtures.populations``).
Source-balanced weights: every Train source group gets the same total weight, split
equally over its eligible queries; LightGBM's lambdarank multiplies each row's
gradient and hessian by that row's weight, so the query's weight is repeated on each
of its rows (see rank_objective.hpp, ``GetGradients``). Early stopping (patience 40,
at most 300 rounds) maximizes development strict preference averaged within, then
across, source groups; a tie is a failure.

A trained model is cached under ``cache_dir/<variant>-<inputs digest>/`` (LightGBM
model text truncated to the best iteration plus ``manifest.json``) and reused when
every input — pools, directions, query texts, corpora, parameters, seed and the
ranker code (``fixtures.code``) — is unchanged. Both files are sealed when written and their seals are
checked before LightGBM reads them: LightGBM aborts the interpreter on a truncated
model file (a C++ fatal error, not an exception) and silently loads a same-length
edit, so a file whose bytes changed is named, discarded and retrained, never loaded.

Which rows enter each variant's loss, with their labels and weights, is ``rankers.lambdamart_rows``.
"""
from __future__ import annotations

import json
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import lightgbm as lgb
import numpy as np
import pandas as pd
from filelock import FileLock

from fixtures.artifacts import ArtifactCorrupt, discard, read_sealed, write_sealed
from fixtures.code import code_digest
from fixtures.identity import corpus_hash, frame_digest, json_digest
from fixtures.settings import SEED
from rankers.base import Ranking, single_score_ranking
from rankers.features import FEATURE_NAMES, POOL_COLUMNS, pool_features
from rankers.lambdamart_rows import (TrainingSet, row_index, strict_by_groups, training_set, usable_directions,
                                     variant_name)
from rankers.shipped import install_model

MAX_ROUNDS = 300
PATIENCE = 40


def lgb_params(seed: int) -> dict[str, object]:
    """The shared, fixed LightGBM configuration of every variant; single-threaded and deterministic."""
    return {
        "objective": "lambdarank",
        "num_leaves": 7,
        "max_depth": 3,
        "learning_rate": 0.03,
        "lambda_l2": 1.0,
        "lambdarank_truncation_level": 2,
        "label_gain": [0.0, 1.0, 2.0],
        "metric": "None",
        "seed": seed,
        "deterministic": True,
        "force_row_wise": True,
        "num_threads": 1,
        "feature_pre_filter": False,
        "verbosity": -1,
    }


def _corpus_of(directions: pd.DataFrame, corpora: Mapping[str, Mapping[str, str]] | Mapping[str, str],
               role: str) -> Mapping[str, str]:
    """The corpus a split retrieves from: ``corpora`` itself when it is one {pid: text} corpus, else by name."""
    if all(isinstance(v, str) for v in corpora.values()):
        return corpora  # type: ignore[return-value]
    if "corpus" not in directions.columns:
        raise ValueError(f"{role} directions lack the 'corpus' column naming their corpus")
    names = directions["corpus"].unique()
    if len(names) != 1:
        raise ValueError(f"{role} directions span {len(names)} corpora {list(names)}; expected one")
    if names[0] not in corpora:
        raise KeyError(f"{role} corpus {names[0]!r} not in corpora {sorted(corpora)}")
    return corpora[names[0]]


_DIRECTION_COLUMNS = ["qid", "pair_id", "split", "preferred_pid", "counterpart_pid", "group", "conflict"]


def input_digests(n_background: int, train_pool: pd.DataFrame, train_directions: pd.DataFrame, dev_pool: pd.DataFrame,
                  dev_directions: pd.DataFrame, queries: Mapping[str, str], train_corpus: Mapping[str, str],
                  dev_corpus: Mapping[str, str], seed: int) -> dict[str, str]:
    """Digest of every input a trained model depends on; the model is reused only when all match."""
    qids = sorted(set(train_pool["qid"]) | set(dev_pool["qid"]))
    digests = {
        "train_pool": frame_digest(train_pool, list(POOL_COLUMNS), ["qid", "pid"]),
        "dev_pool": frame_digest(dev_pool, list(POOL_COLUMNS), ["qid", "pid"]),
        "train_directions": frame_digest(train_directions, _DIRECTION_COLUMNS, ["qid"]),
        "dev_directions": frame_digest(dev_directions, _DIRECTION_COLUMNS, ["qid"]),
        "queries": json_digest({q: queries.get(q) for q in qids}),
        "train_corpus": corpus_hash(dict(train_corpus)),
        "dev_corpus": corpus_hash(dict(dev_corpus)),
        "code": code_digest(__name__),
        "config": json_digest({"variant": variant_name(n_background), "params": lgb_params(seed),
                               "max_rounds": MAX_ROUNDS, "patience": PATIENCE,
                               "n_background": n_background, "lightgbm": lgb.__version__}),
    }
    digests["combined"] = json_digest(digests)
    return digests


@dataclass(frozen=True)
class TrainedRanker:
    """A fitted LambdaMART booster (truncated to its best iteration) and its manifest."""

    booster: lgb.Booster
    manifest: dict[str, object]
    path: Path

    @property
    def n_trees(self) -> int:
        return int(self.manifest["n_trees"])  # type: ignore[arg-type]

    def scores(self, pool: pd.DataFrame, queries: Mapping[str, str], corpus: Mapping[str, str],
               features: np.ndarray | None = None) -> np.ndarray:
        """One score per pool row (aligned with ``pool``), from features of the complete pool.

        ``features`` (``pool_features`` of this very pool) lets E0 and N=8 share one computation.
        """
        if not len(pool):
            return np.zeros(0)
        x = pool_features(pool, queries, corpus) if features is None else features
        if x.shape != (len(pool), len(FEATURE_NAMES)):
            raise ValueError(f"features of shape {x.shape} do not describe a pool of {len(pool)} rows")
        return self.booster.predict(x, num_threads=1)

    def rank(self, pool: pd.DataFrame, queries: Mapping[str, str], corpus: Mapping[str, str], name: str,
             features: np.ndarray | None = None) -> Ranking:
        """The whole pool ordered by score (ties by passage id for position only); key (score, 0, 0).

        Works for any pool, including queries with a single candidate.
        """
        return single_score_ranking(pool, self.scores(pool, queries, corpus, features), name,
                                    variant=self.manifest["variant"], n_trees=self.n_trees)


_MODEL, _MANIFEST = "model.txt", "manifest.json"


def load_ranker(path: Path) -> TrainedRanker:
    """A cached ranker directory (model.txt + manifest.json); ``ArtifactCorrupt`` when either differs from its seal.

    The seals are checked before LightGBM sees the model, since LightGBM cannot be trusted to reject a damaged one
    (it aborts the process or reads altered numbers), and LightGBM parses the very text that was checked (never read
    through a link, ``fixtures.artifacts.read_sealed``).
    """
    path = Path(path)
    manifest = json.loads(read_sealed(path / _MANIFEST, "LightGBM ranker manifest"))
    booster = lgb.Booster(model_str=read_sealed(path / _MODEL, "LightGBM ranker model").decode("utf-8"))
    if booster.num_trees() != manifest["n_trees"]:
        raise ValueError(f"{path}: model has {booster.num_trees()} trees, manifest says {manifest['n_trees']}")
    return TrainedRanker(booster, manifest, path)


def train_ranker(n_background: int, train_pool: pd.DataFrame, train_directions: pd.DataFrame, dev_pool: pd.DataFrame,
                 dev_directions: pd.DataFrame, queries: Mapping[str, str],
                 corpora: Mapping[str, Mapping[str, str]] | Mapping[str, str], cache_dir: Path,
                 seed: int = SEED, shipped: bool = True) -> TrainedRanker:
    """Train (or reuse from ``cache_dir``) the variant with ``n_background`` background candidates per query.

    A model the checkout ships under the folder name these inputs give (``rankers.shipped``; ``shipped=False``
    never reads it) is copied into ``cache_dir`` instead of being trained: the same name means the same inputs.

    ``corpora`` is either the one {pid: text} corpus Train and development share (the
    Train+Validation corpus) or a mapping of corpus names (the directions' ``corpus``
    column, as ``Study.corpora``) to corpora. Raises ValueError when no Train or
    development direction is usable.
    """
    name = variant_name(n_background)
    train_corpus = _corpus_of(train_directions, corpora, "train")
    dev_corpus = _corpus_of(dev_directions, corpora, "development")
    digests = input_digests(n_background, train_pool, train_directions, dev_pool, dev_directions, queries,
                            train_corpus, dev_corpus, seed)
    out = Path(cache_dir) / f"{name}-{digests['combined'][:20]}"
    out.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out / ".lock")):
        if shipped and not (out / _MANIFEST).exists():
            install_model(out.name, out, (_MODEL, _MANIFEST))
        if (out / _MANIFEST).exists() and (out / _MODEL).exists():
            try:
                cached = load_ranker(out)
            except ArtifactCorrupt as exc:
                warnings.warn(f"{exc}; discarded the cached {name} ranker in {out} and retraining it", stacklevel=2)
                discard(out / _MODEL)
                discard(out / _MANIFEST)
            else:
                if cached.manifest.get("input_digests") == digests:
                    return cached
        ranker = _fit(n_background, train_pool, train_directions, dev_pool, dev_directions, queries, train_corpus,
                      dev_corpus, seed, digests, out)
    return ranker


def _fit(n_background: int, train_pool: pd.DataFrame, train_directions: pd.DataFrame, dev_pool: pd.DataFrame,
         dev_directions: pd.DataFrame, queries: Mapping[str, str], train_corpus: Mapping[str, str],
         dev_corpus: Mapping[str, str], seed: int, digests: dict[str, str], out: Path) -> TrainedRanker:
    """Train with development early stopping, keep the best iteration, and save model and manifest sealed."""
    start = time.perf_counter()
    train_pool = train_pool.sort_values(["qid", "pid"], kind="mergesort").reset_index(drop=True)
    dev_pool = dev_pool.sort_values(["qid", "pid"], kind="mergesort").reset_index(drop=True)
    name = variant_name(n_background)
    train = training_set(n_background, train_pool, pool_features(train_pool, queries, train_corpus), train_directions,
                         seed)
    dev = usable_directions(dev_pool, dev_directions)
    if dev.empty:
        raise ValueError(f"{name}: no usable development direction for early stopping")
    params = lgb_params(seed)
    dtrain = lgb.Dataset(train.features, label=train.labels, weight=train.weights, group=train.group_sizes,
                         feature_name=list(FEATURE_NAMES), params=params, free_raw_data=False)
    dval, dev_strict = _development(dev, dev_pool, pool_features(dev_pool, queries, dev_corpus), dtrain)
    history: dict[str, dict[str, list[float]]] = {}
    booster = lgb.train(params, dtrain, num_boost_round=MAX_ROUNDS, valid_sets=[dval], valid_names=["development"],
                        feval=dev_strict, callbacks=[lgb.early_stopping(PATIENCE, first_metric_only=True, verbose=False),
                                                     lgb.record_evaluation(history)])
    best = int(booster.best_iteration) or booster.current_iteration()
    model_text = booster.model_to_string(num_iteration=best)
    final = lgb.Booster(model_str=model_text)
    curve = history["development"]["dev_strict"]
    manifest: dict[str, object] = {
        "variant": name, "n_trees": final.num_trees(), "best_iteration": best, "rounds_run": len(curve),
        "dev_strict_best": curve[best - 1], "dev_strict_curve": curve, "dev_queries": len(dev),
        "dev_groups": int(dev["group"].nunique()), "params": params, "max_rounds": MAX_ROUNDS, "patience": PATIENCE,
        "seed": seed, "feature_names": list(FEATURE_NAMES), **_training_record(train, train_directions),
        "n_background": n_background, "input_digests": digests, "lightgbm_version": lgb.__version__,
        "train_seconds": round(time.perf_counter() - start, 3),
    }
    # The manifest is sealed last: a run killed in between leaves no manifest, so the model is retrained.
    write_sealed(out / _MODEL, lambda p: p.write_text(model_text, encoding="utf-8"))
    manifest_text = json.dumps(manifest, indent=1, sort_keys=True) + "\n"
    write_sealed(out / _MANIFEST, lambda p: p.write_text(manifest_text, encoding="utf-8"))
    return TrainedRanker(final, manifest, out)


def _development(dev: pd.DataFrame, dev_pool: pd.DataFrame, dev_x: np.ndarray, dtrain: lgb.Dataset):
    """The development set (rows interleaved preferred, counterpart per query, so the metric reads pairs) and
    its stopping metric: strict preference averaged within, then across, source groups."""
    pos = dev_x[row_index(dev_pool, dev["qid"].to_numpy(), dev["preferred_pid"].to_numpy())]
    neg = dev_x[row_index(dev_pool, dev["qid"].to_numpy(), dev["counterpart_pid"].to_numpy())]
    groups, n = dev["group"].to_numpy(), len(dev)
    dval = lgb.Dataset(np.stack([pos, neg], axis=1).reshape(2 * n, -1), label=np.tile([1.0, 0.0], n),
                       group=np.full(n, 2), reference=dtrain)

    def dev_strict(preds: np.ndarray, _data: lgb.Dataset) -> tuple[str, float, bool]:
        return "dev_strict", strict_by_groups(preds[0::2], preds[1::2], groups), True
    return dval, dev_strict


def _training_record(train: TrainingSet, train_directions: pd.DataFrame) -> dict[str, object]:
    """What entered the loss, for the manifest: rows, queries, groups, labels, exclusions, sampled background."""
    return {
        "training_rows": int(len(train.labels)),
        "training_queries": int(len(train.group_sizes)),
        "training_groups": int(train_directions.set_index("qid").loc[np.unique(train.qids), "group"].nunique()),
        "label_counts": {str(int(k)): int(v) for k, v in zip(*np.unique(train.labels, return_counts=True))},
        "excluded_train_directions": int(len(train_directions) - len(train.group_sizes)),
        "background": train.background,
    }
