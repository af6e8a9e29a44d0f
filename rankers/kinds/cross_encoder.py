"""``kind = "cross_encoder"``: a sequence-classification model as a window scorer (``docs/protocol.md#cross-encoder``).

``model`` is a hub name or a local folder; ``model = "trained"`` is the embedded cross-encoder,
fine-tuned here on the Train pools (the CI budget on a ``--subset-pairs`` run) and cached; its
identity then names the pools, the data, the seed and the budget it was trained from, and it
fixes ``max_length``, ``dtype`` and ``revision`` as trained.
"""
from __future__ import annotations

from typing import Any

from fixtures.models import require_model
from rankers.kinds.base import Context, KindBuildError, RankerDecl, register
from rankers.kinds.pointwise import PointwiseKind
from rankers.kinds.requirements import CUDA, Requirement
from rankers.scorers.base import TextScorer

TRAINED = "trained"


class CrossEncoder(PointwiseKind):
    name = "cross_encoder"
    options = {"model": (str,), "dtype": (str,), "device": (str,), "batch_size": (int,), "max_length": (int,),
               "int8": (bool,), "revision": (str,)}
    required = ("model",)
    doc = "a transformers sequence-classification model (hub name or local folder); 'trained' = fine-tuned here"

    def requirements(self, options) -> tuple[Requirement, ...]:
        return (CUDA,) if str(options.get("device", "")).startswith("cuda") else ()

    def trains_on(self, options) -> tuple[str, ...]:
        return ("train", "development") if options.get("model") == TRAINED else ()

    def models(self, options) -> tuple[str, ...]:
        return () if options.get("model") == TRAINED else ("model",)

    def identity(self, decl: RankerDecl, ctx: Context) -> dict[str, Any]:
        identity = super().identity(decl, ctx)
        if decl.options.get("model") == TRAINED:
            identity.update(pools=[ctx.pool_digest(s) for s in ("train", "development")], seed=ctx.seed,
                            data=ctx.study.data_provenance(), budget=self.budget(ctx))
        return identity

    @staticmethod
    def budget(ctx: Context) -> str:
        return "ci" if ctx.subset else "full"

    def build(self, decl: RankerDecl, ctx: Context) -> TextScorer:
        options = dict(decl.options)
        model = options.pop("model")
        if model == TRAINED:
            fixed = sorted(set(options) & {"max_length", "dtype", "revision"})
            if fixed:
                raise KindBuildError(f"{ctx.where(decl)}: the trained cross-encoder fixes {fixed} as trained; "
                                     "declare batch_size, device or int8 only")
            return self.trained(ctx).scorer(**options)
        from rankers.scorers.cross_encoder import CrossEncoderScorer  # heavy: torch and transformers

        return CrossEncoderScorer(require_model(model, decl.name), **options)

    def trained(self, ctx: Context):
        """The embedded cross-encoder, fine-tuned on Train (subset budget on --subset-pairs runs), cached."""
        from rankers.scorers.ce_training import train_cross_encoder  # heavy: torch and transformers

        def train():
            with ctx.stage("train", "train_cross_encoder") as record:
                trained = train_cross_encoder(ctx.study, ctx.pool("train"), ctx.pool("development"),
                                              ctx.cache("models", "cross-encoder"), seed=ctx.seed,
                                              budget=self.budget(ctx))
                record.update(name=trained.name, path=str(trained.path))
            return trained
        return ctx.shared(("trained-cross-encoder",), train)


register(CrossEncoder())
