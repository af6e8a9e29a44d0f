"""``kind = "trec_run"``: another system's TREC run evaluated in the fixed pool (``docs/protocol.md#trec-runs``).

``path`` is relative to the profile file that declares it; ``{split}`` in it selects one file per
split. Unranked pool passages follow in fusion's order. The run's qids are checked against the split before any
work (``preflight_data``) and again when the run is read: a run that holds no qid of the split, qids that are no
NevIR direction, and qids of other splits (unless ``other_splits = "ignore"`` declares them) are errors naming the
file, the line and the qid; qids of the split outside a ``--subset-pairs`` sample are dropped and counted. What
was ranked, unranked and dropped rides on the ranking (``Ranking.info["coverage"]``) into ``coverage.csv``.
The ranking is memoized under the run file's bytes and fusion's key.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from fixtures.artifacts import sha256_file
from fixtures.study import Study
from rankers.base import Ranking
from rankers.kinds.base import Context, DeclarationError, KindBuildError, PoolKind, RankerDecl, register

#: Whose order the passages a run does not rank keep.
UNRANKED_ORDER = "fusion"
#: What to do with run lines of other splits' qids: an error (a run declared for the wrong split), or drop them.
OTHER_SPLITS = ("error", "ignore")


class TrecRun(PoolKind):
    name = "trec_run"
    options = {"path": (str,), "other_splits": (str,)}
    required = ("path",)
    doc = "a TREC run file of another system, evaluated in the fixed pool"

    def check(self, options, where: str) -> None:
        if options.get("other_splits", "error") not in OTHER_SPLITS:
            raise DeclarationError(f"{where}: other_splits must be one of {list(OTHER_SPLITS)}, "
                                   f"got {options['other_splits']!r}")

    def paths(self, options) -> tuple[str, ...]:
        return ("path",)

    @staticmethod
    def split_path(options, split: str) -> str:
        """The declared path with ``{split}`` replaced: the file read for ``split``."""
        return options["path"].replace("{split}", split)

    def preflight(self, options, splits: Sequence[str]) -> list[str]:
        missing = [str(Path(self.split_path(options, s))) for s in splits]
        missing = [p for p in dict.fromkeys(missing) if not Path(p).is_file()]
        if not missing:
            return []
        return [f"run file(s) not found: {missing} (paths resolve relative to the profile file; "
                f"{{split}} in the path is replaced by each evaluated split)"]

    @staticmethod
    def path(decl: RankerDecl, ctx: Context, split: str) -> Path:
        return ctx.resolve_path(TrecRun.split_path(decl.options, split))

    def memo_key(self, decl: RankerDecl, ctx: Context, split: str) -> dict[str, Any]:
        return {"run": sha256_file(self.path(decl, ctx, split)), "unranked": ctx.ranking_key(split, UNRANKED_ORDER),
                "data": ctx.study.data_provenance(), **self.code()}

    def preflight_data(self, options, splits: Sequence[str], study: Callable[[], Study]) -> list[str]:
        from rankers.trec_run import run_qids, split_problem  # only when a run file is declared

        directions = study().directions
        split_of = dict(zip(directions["qid"], directions["split"]))
        problems = (split_problem(path, split, run_qids(path), split_of, options.get("other_splits") == "ignore")
                    for split, path in ((s, self.split_path(options, s)) for s in dict.fromkeys(splits)))
        return [p for p in problems if p is not None]

    def rank(self, decl: RankerDecl, ctx: Context, split: str) -> Ranking:
        from rankers.trec_run import run_qids, split_problem, trec_run_ranking  # only when a run file is declared

        path = self.path(decl, ctx, split)
        ranking, coverage = trec_run_ranking(path, ctx.ranking(split, UNRANKED_ORDER), decl.name,
                                             allow_extra_qids=True)
        split_of = dict(zip(ctx.study.directions["qid"], ctx.study.directions["split"]))
        ignore = decl.options.get("other_splits", "error") == "ignore"
        problem = split_problem(path, split, run_qids(path), split_of, ignore) if coverage.extra_qids else None
        if problem is not None:
            raise KindBuildError(f"{ctx.where(decl)}: {problem}")
        other = [q for q in coverage.extra_qids if split_of[q] != split]
        if len(coverage.uncovered_qids) == len(coverage.per_query):
            raise KindBuildError(f"{ctx.where(decl)}: run file {path} holds no qid of split {split!r} (its "
                                 f"{len(coverage.extra_qids)} qid(s) belong to other splits or outside this run's "
                                 "sample): every direction would be a tie")
        outside = [q for q in coverage.extra_qids if split_of[q] == split]
        ranking.info["coverage"] = {
            "run_file": str(path), "run_sha256": sha256_file(path), **coverage.totals(),
            "other_split_qids": len(other), "other_split_lines": sum(coverage.extra_lines[q] for q in other),
            "outside_sample_qids": len(outside), "outside_sample_lines": sum(coverage.extra_lines[q] for q in outside),
            "unknown_qids": 0}
        return ranking


register(TrecRun())
