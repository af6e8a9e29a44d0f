"""``kind = "fusion"``: the fixed fusion of the three routes (``docs/protocol.md#fusion``).

``weights`` and ``thresholds`` (per route) replace the protocol's values for a declared variant.
"""
from __future__ import annotations

from rankers.base import Ranking
from rankers.fusion import declared_rules, fusion_ranking
from rankers.kinds.base import Context, DeclarationError, PoolKind, RankerDecl, register


class Fusion(PoolKind):
    name = "fusion"
    options = {"weights": (dict,), "thresholds": (dict,)}
    doc = "fixed fusion of the three routes; weights/thresholds override the protocol's per route"

    def check(self, options, where: str) -> None:
        try:
            declared_rules(options.get("weights"), options.get("thresholds"))
        except (TypeError, ValueError) as exc:
            raise DeclarationError(f"{where}: {exc}") from None

    def rank(self, decl: RankerDecl, ctx: Context, split: str) -> Ranking:
        rules = declared_rules(decl.options.get("weights"), decl.options.get("thresholds"))
        return fusion_ranking(ctx.pool(split), rules, name=decl.name)


register(Fusion())
