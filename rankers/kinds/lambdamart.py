"""``kind = "lambdamart"``: LightGBM LambdaMART over the pool features (``docs/protocol.md#lambdamart``).

``background`` is the number of background candidates per Train query in the loss: 0 is E0
(pair-only), 8 the paper's N=8; any other count is its own variant, trained and cached on its own.
``seeds`` (default 5) is how many training seeds the variant is trained with: the run's seed (the
paper's single-seed protocol, Table II's row) and the ones after it; claims about the training
procedure are decided on the seed-averaged outcomes (``docs/statistics.md#seeds``). Each model is
trained once per session, seed and count on the Train pools with development stopping, and the pool
features of a split are computed once for every variant and seed that scores it.
"""
from __future__ import annotations

from typing import Any

from fixtures.perturbation import perturb_route_scores
from rankers.base import Ranking
from rankers.kinds.base import Context, DeclarationError, PoolKind, RankerDecl, register
from rankers.lambdamart_rows import variant_name


#: Training seeds per variant unless declared: LambdaMART is cheap to train, so the claim is about the procedure.
DEFAULT_SEEDS = 5


class LambdaMART(PoolKind):
    name = "lambdamart"
    options = {"background": (int,), "seeds": (int,)}
    required = ("background",)
    doc = ("LightGBM lambdarank over the 38 pool features; background 0 = E0, 8 = N=8, any count N >= 0; "
           f"seeds = training seeds (default {DEFAULT_SEEDS})")

    def check(self, options, where: str) -> None:
        background = options["background"]
        if isinstance(background, bool) or not isinstance(background, int) or background < 0:
            raise DeclarationError(f"{where}: background must be an integer >= 0 (0 is E0), got {background!r}")
        seeds = options.get("seeds", DEFAULT_SEEDS)
        if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
            raise DeclarationError(f"{where}: seeds must be an integer >= 1 (1 = the run's seed only), got {seeds!r}")

    def trains_on(self, options) -> tuple[str, ...]:
        return ("train", "development")

    def seeds(self, options, base_seed: int) -> tuple[int, ...]:
        return tuple(base_seed + i for i in range(int(options.get("seeds", DEFAULT_SEEDS))))

    def memo_key(self, decl: RankerDecl, ctx: Context, split: str) -> dict[str, Any]:
        return {"pools": [ctx.pool_digest(s) for s in ("train", "development", split)],
                "data": ctx.study.data_provenance(), "seed": ctx.seed, **self.code()}

    def rank(self, decl: RankerDecl, ctx: Context, split: str) -> Ranking:
        return self.rank_seed(decl, ctx, split, ctx.seed)

    def rank_seed(self, decl: RankerDecl, ctx: Context, split: str, seed: int, perturbed: bool = False) -> Ranking:
        """The split ranked by the model of ``seed``; ``perturbed``: by the model trained on Train and development
        pools whose route scores carry floating-point noise (``docs/statistics.md#perturbation``)."""
        trained = self.trained(ctx, int(decl.options["background"]), seed, perturbed)
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
    def trained(ctx: Context, background: int, seed: int, perturbed: bool = False):
        """The variant trained with ``seed`` on Train pools with development stopping (cached on disk by its inputs);
        ``perturbed``: on those pools with their route scores moved by floating-point noise."""
        from rankers.lambdamart import train_ranker  # heavy: lightgbm

        def pool(split: str):
            return perturb_route_scores(ctx.pool(split), ctx.seed) if perturbed else ctx.pool(split)

        def train():
            suffix = ("" if seed == ctx.seed else f"_seed{seed}") + ("_perturbed" if perturbed else "")
            with ctx.stage("train", f"train_{variant_name(background)}{suffix}"):
                return train_ranker(background, train_pool=pool("train"), train_directions=ctx.population("train"),
                                    dev_pool=pool("development"), dev_directions=ctx.population("development"),
                                    queries={**ctx.queries("train"), **ctx.queries("development")},
                                    corpora=ctx.study.corpora["trainval"], cache_dir=ctx.cache("models", "lambdamart"),
                                    seed=seed, shipped=ctx.shipped)
        return ctx.shared(("lambdamart", background, seed, perturbed), train)


register(LambdaMART())
