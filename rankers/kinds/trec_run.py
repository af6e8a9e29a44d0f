"""``kind = "trec_run"``: another system's TREC run evaluated in the fixed pool (``docs/protocol.md#trec-runs``).

``path`` is relative to the profile that declares it; ``{split}`` in it selects one file per split.
Unranked pool passages follow in fusion's order; qids that are no NevIR direction of any split are
an error naming the file. The ranking is memoized under the run file's bytes and fusion's key.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from fixtures.artifacts import sha256_file
from rankers.base import Ranking
from rankers.kinds.base import Context, KindBuildError, PoolKind, RankerDecl, register

#: Whose order the passages a run does not rank keep.
UNRANKED_ORDER = "fusion"


class TrecRun(PoolKind):
    name = "trec_run"
    options = {"path": (str,)}
    required = ("path",)
    doc = "a TREC run file of another system, evaluated in the fixed pool"

    @staticmethod
    def path(decl: RankerDecl, ctx: Context, split: str) -> Path:
        return ctx.resolve_path(decl.options["path"].replace("{split}", split))

    def memo_key(self, decl: RankerDecl, ctx: Context, split: str) -> dict[str, Any]:
        return {"run": sha256_file(self.path(decl, ctx, split)), "unranked": ctx.ranking_key(split, UNRANKED_ORDER),
                "data": ctx.study.data_provenance(), **self.code()}

    def rank(self, decl: RankerDecl, ctx: Context, split: str) -> Ranking:
        from rankers.trec_run import trec_run_ranking  # only when a run file is declared

        path = self.path(decl, ctx, split)
        ranking, coverage = trec_run_ranking(path, ctx.ranking(split, UNRANKED_ORDER), decl.name,
                                             allow_extra_qids=True)
        unknown = sorted(set(coverage.extra_qids) - set(ctx.study.directions["qid"]))
        if unknown:
            raise KindBuildError(f"{ctx.where(decl)}: run file {path} ranks {len(unknown)} qid(s) that are no NevIR "
                                 f"direction of any split, e.g. {unknown[:3]}")
        return ranking


register(TrecRun())
