"""``kind = "lambdamart"``: LightGBM LambdaMART over the pool features (``docs/protocol.md#lambdamart``).

``background`` is the number of background candidates per Train query in the loss: 0 is E0
(pair-only), 8 the paper's N=8; any other count is its own variant, trained and cached on its own.
The model is trained once per session and count on the Train pools with development stopping, and
the pool features of a split are computed once for every variant that scores it.
"""
from __future__ import annotations

from typing import Any

from rankers.base import Ranking
from rankers.kinds.base import Context, DeclarationError, PoolKind, RankerDecl, register


class LambdaMART(PoolKind):
    name = "lambdamart"
    options = {"background": (int,)}
    required = ("background",)
    doc = "LightGBM lambdarank over the 38 pool features; background 0 = E0, 8 = N=8, any count N >= 0"

    def check(self, options, where: str) -> None:
        background = options["background"]
        if isinstance(background, bool) or not isinstance(background, int) or background < 0:
            raise DeclarationError(f"{where}: background must be an integer >= 0 (0 is E0), got {background!r}")

    def memo_key(self, decl: RankerDecl, ctx: Context, split: str) -> dict[str, Any]:
        return {"pools": [ctx.pool_digest(s) for s in ("train", "development", split)],
                "data": ctx.study.data_provenance(), "seed": ctx.seed, **self.code()}

    def rank(self, decl: RankerDecl, ctx: Context, split: str) -> Ranking:
        trained = self.trained(ctx, int(decl.options["background"]))
        return trained.rank(ctx.pool(split), ctx.queries(split), ctx.study.corpus_for(split), decl.name,
                            features=self.features(ctx, split))

    @staticmethod
    def features(ctx: Context, split: str):
        """The 38 pool features of a split, computed once for every variant that scores it."""
        from rankers.features import pool_features  # only when a learned ranking is not memoized

        def compute():
            with ctx.stage(split, "pool_features"):
                return pool_features(ctx.pool(split), ctx.queries(split), ctx.study.corpus_for(split))
        return ctx.shared(("pool_features", split), compute)

    @staticmethod
    def trained(ctx: Context, background: int):
        """The variant trained on Train pools with development stopping (cached on disk by its inputs)."""
        from rankers.lambdamart import train_ranker, variant_name  # heavy: lightgbm

        def train():
            with ctx.stage("train", f"train_{variant_name(background)}"):
                return train_ranker(background, train_pool=ctx.pool("train"), train_directions=ctx.population("train"),
                                    dev_pool=ctx.pool("development"), dev_directions=ctx.population("development"),
                                    queries={**ctx.queries("train"), **ctx.queries("development")},
                                    corpora=ctx.study.corpora["trainval"], cache_dir=ctx.cache("models", "lambdamart"),
                                    seed=ctx.seed)
        return ctx.shared(("lambdamart", background), train)


register(LambdaMART())
