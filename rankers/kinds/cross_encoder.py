"""``kind = "cross_encoder"``: a sequence-classification model as a window scorer (``docs/protocol.md#cross-encoder``).

``model`` is a hub name or a local folder; ``model = "trained"`` is the embedded cross-encoder,
fine-tuned here on the Train pools and cached; its identity then names the pools, the data, the seed
and the budget it was trained from, and it fixes ``max_length``, ``dtype`` and ``revision`` as trained.
``train_on`` says whose Train pools: the declared dataset's (``"dataset"``, the default; a pair set without
Train and development makes it not applicable) or NevIR's (``"nevir"``: the embedded model itself, whatever
dataset it then scores; docs/protocol.md#your-own-contrastive-pairs).

A ``--subset-pairs`` run keeps Train and development whole, so the full run's model is its model too: it is
read when cached, and only a cache without it (a cold CI) trains the smaller CI budget instead, cached and
shared by every subset run (``budget``; the costs in docs/benchmarks.md#the-ci-subset-and-the-cross-encoder).
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from fixtures.code import code_identity
from fixtures.models import require_model
from fixtures.settings import Settings
from fixtures.study import Study, build_study
from rankers.kinds.base import Context, DeclarationError, KindBuildError, RankerDecl, register
from rankers.kinds.pointwise import PointwiseKind
from rankers.kinds.requirements import CUDA, Requirement
from rankers.scorers.base import TextScorer
from rankers.shipped import ShippedJudgments

TRAINED = "trained"


class TrainedState(NamedTuple):
    """What a run will do about a trained model, known before it (``harness.explain``): whether the model is there to
    read (cached, or its judgments shipped), under which budget, and whether its study judgments ship instead."""

    cached: bool
    budget: str
    shipped: bool = False
#: Whose Train and development pools ``model = "trained"`` learns from: the declared dataset's, or NevIR's.
TRAIN_ON = ("dataset", "nevir")


class CrossEncoder(PointwiseKind):
    name = "cross_encoder"
    options = {"model": (str,), "dtype": (str,), "device": (str,), "batch_size": (int,), "max_length": (int,),
               "int8": (bool,), "revision": (str,), "train_on": (str,)}
    required = ("model",)
    doc = "a transformers sequence-classification model (hub name or local folder); 'trained' = fine-tuned here"

    def requirements(self, options) -> tuple[Requirement, ...]:
        return (CUDA,) if str(options.get("device", "")).startswith("cuda") else ()

    def check(self, options, where: str) -> None:
        train_on = options.get("train_on")
        if train_on is not None and (options.get("model") != TRAINED or train_on not in TRAIN_ON):
            raise DeclarationError(f"{where}: train_on applies to model = {TRAINED!r} only and must be one of "
                                   f"{list(TRAIN_ON)}, got {train_on!r}")

    def trains_on(self, options) -> tuple[str, ...]:
        own = options.get("model") == TRAINED and options.get("train_on", "dataset") == "dataset"
        return ("train", "development") if own else ()

    def models(self, options) -> tuple[str, ...]:
        return () if options.get("model") == TRAINED else ("model",)

    def identity(self, decl: RankerDecl, ctx: Context, budget: str | None = None) -> dict[str, Any]:
        """The scorer's identity; a trained model's names its training inputs and budget (``budget``: this one, not
        the run's)."""
        identity = super().identity(decl, ctx)
        if decl.options.get("model") == TRAINED:
            study, _, digest = self.training_data(decl, ctx)
            identity.update(pools=[digest(s) for s in ("train", "development")], seed=ctx.seed,
                            data=study.data_provenance(), budget=budget or self.budget(decl, ctx))
        return identity

    def shipped(self, decl: RankerDecl, ctx: Context, budget: str | None = None) -> bool:
        """Whether the checkout ships this trained model's judgments of the study (``rankers.shipped``): then it is
        neither trained nor loaded for them."""
        return (ctx.shipped and decl.options.get("model") == TRAINED
                and ShippedJudgments.find(self.identity(decl, ctx, budget)) is not None)

    @staticmethod
    def training_data(decl: RankerDecl, ctx: Context) -> tuple[Study, Callable[[str], pd.DataFrame],
                                                                 Callable[[str], str]]:
        """The study the trained model learns from, its pools and their digests: the declared dataset's, or with
        ``train_on = "nevir"`` NevIR's with the embedded routes (the shipped frozen pools, copied into the cache)."""
        if decl.options.get("train_on", "dataset") == "dataset":
            return ctx.study, ctx.pool, ctx.pool_digest

        def load():
            from fixtures.pools import build_pool  # heavy: pandas/pyarrow pools, route models if one must be built

            study = build_study()
            return study, {s: build_pool(study, s, Settings(cache_dir=ctx.cache())) for s in ("train", "development")}
        study, snapshots = ctx.shared(("nevir-training-pools",), load)
        return study, lambda s: snapshots[s].frame, lambda s: str(snapshots[s].manifest["parquet_sha256"])

    def budget(self, decl: RankerDecl, ctx: Context) -> str:
        """The training budget: "full"; on a subset run "full" when that model is cached or its judgments ship with the
        checkout (``rankers.shipped``), else "ci".

        Decided once per run (``ctx.shared``), so a full model another process saves meanwhile does not change the
        model under an identity already keyed. Training the full model cold would make a cold CI ~3 min slower
        (docs/benchmarks.md#the-ci-subset-and-the-cross-encoder), so the CI budget stays for a cache without it.
        """
        if not ctx.subset:
            return "full"

        def decide() -> str:
            from rankers.scorers.ce_store import is_trained  # reads the model's folder only

            if self.shipped(decl, ctx, "full"):
                return "full"
            study, pool, digest = self.training_data(decl, ctx)
            # Where the full model is (or would be) saved, kept in the memo by its inputs: a warm run knows it
            # without loading the training code (torch, transformers) just to name a folder.
            inputs = {"train": digest("train"), "development": digest("development"),
                      "data": study.data_provenance(), "seed": ctx.seed, **code_identity("rankers.scorers.ce_training")}
            folder = ctx.memo("cross-encoder-full-model", inputs, lambda: str(self._full_plan(study, pool, ctx).out))
            return "full" if is_trained(Path(folder)) else "ci"
        return ctx.shared(("cross-encoder-budget", decl.options.get("train_on", "dataset")), decide)

    @staticmethod
    def _full_plan(study: Study, pool: Callable[[str], pd.DataFrame], ctx: Context):
        from rankers.scorers.ce_training import plan_training  # heavy: torch and transformers

        return plan_training(study, pool("train"), pool("development"), ctx.cache("models", "cross-encoder"),
                             seed=ctx.seed, budget="full")

    def trained_state(self, decl: RankerDecl, ctx: Context) -> TrainedState | None:
        """Whether the model this declaration trains is cached (known from its key, nothing trained) or its judgments
        ship, and under which budget; None for a model that is not trained here (``harness.explain`` says so before a
        run)."""
        if decl.options.get("model") != TRAINED:
            return None
        if self.shipped(decl, ctx):
            return TrainedState(True, self.budget(decl, ctx), shipped=True)
        from rankers.scorers.ce_store import is_trained  # reads the model's folder only
        from rankers.scorers.ce_training import plan_training  # heavy: torch and transformers

        budget = self.budget(decl, ctx)
        study, pool, _ = self.training_data(decl, ctx)
        plan = plan_training(study, pool("train"), pool("development"), ctx.cache("models", "cross-encoder"),
                             seed=ctx.seed, budget=budget)
        return TrainedState(is_trained(plan.out), budget)

    def build(self, decl: RankerDecl, ctx: Context) -> TextScorer:
        options = dict(decl.options)
        model = options.pop("model")
        options.pop("train_on", None)
        if model == TRAINED:
            fixed = sorted(set(options) & {"max_length", "dtype", "revision"})
            if fixed:
                raise KindBuildError(f"{ctx.where(decl)}: the trained cross-encoder fixes {fixed} as trained; "
                                     "declare batch_size, device or int8 only")
            return self.trained(decl, ctx).scorer(**options)
        from rankers.scorers.cross_encoder import CrossEncoderScorer  # heavy: torch and transformers

        return CrossEncoderScorer(require_model(model, decl.name), **options)

    def trained(self, decl: RankerDecl, ctx: Context):
        """The embedded cross-encoder, fine-tuned on Train (on a subset run, the budget ``budget`` chose), cached."""
        from rankers.scorers.ce_training import train_cross_encoder  # heavy: torch and transformers

        train_on = decl.options.get("train_on", "dataset")
        study, pool, _ = self.training_data(decl, ctx)

        def train():
            with ctx.stage("train", "train_cross_encoder") as record:
                trained = train_cross_encoder(study, pool("train"), pool("development"),
                                              ctx.cache("models", "cross-encoder"), seed=ctx.seed,
                                              budget=self.budget(decl, ctx))
                record.update(name=trained.name, path=str(trained.path))
            return trained
        return ctx.shared(("trained-cross-encoder", train_on), train)


register(CrossEncoder())
