"""Another system's TREC run, evaluated in the suite's fixed pool (``docs/protocol.md#trec-runs``).

A run file (``qid Q0 pid rank score tag``, whitespace-separated, one line per ranked
passage) is turned into a :class:`~rankers.base.Ranking` over the pool, so it is measured
by exactly the rules of every other ranker. The rule, per pool query:

1. **Ranked pool passages** (the run ranks them and the pool holds them) come first, ordered
   by the run's score, descending, as trec_eval reads a run. Their strict key is
   ``(1, score, 0)``: equal run scores are ties (a tie is never a strict success). Among
   equal scores the list position follows the run's rank column, then the passage id.
2. **Unranked pool passages** (in the pool, absent from the run) follow, in the reference
   (fusion) order, with the equal key ``(0, 0, 0)``: the run expressed no preference among
   them, so none is strictly greater than another, and every ranked passage is strictly
   greater than every unranked one. A pool query the run does not mention at all consists
   of unranked passages only: fusion's list positions, all keys tied.
3. **Ranked passages outside the pool** are dropped: the pool is fixed and nothing enters it.
4. **Run qids that are not pool queries** are an error naming the file, their count and
   examples (a run of another split or another query-id scheme would otherwise score as
   "uncovered" everywhere without a word). ``allow_extra_qids=True`` drops them instead,
   and they are counted.

Every count is returned (:class:`RunCoverage`) and summarized in ``Ranking.info`` (so a memoized
ranking keeps them): per query the ranked-in-pool, unranked-in-pool and ranked-outside-pool
passages, the pool queries the run does not cover, and any dropped extra qids.
:func:`direction_coverage` counts, over a ranker's directions, which designated passages the
run ranked and its ties by cause (both designated passages unranked, or equal run scores);
the report publishes both (``coverage.csv``).

The file is read by ``rankers.trec.read_run``: six fields per non-blank line, an integer
rank, a finite score, each (qid, pid) at most once; any violation is an error naming the
file and line.

**Round trip of the suite's own runs.** ``rankers.trec.write_run`` writes the ranker's score keys
(its own score, exactly, or its keys' dense rank within the query): equal keys are equal scores.
Read back, a run exported from a ranking reproduces its strict outcomes and its ties exactly, and its
list positions too (equal scores in passage id order, as the suite's rankers order their ties): ranks,
MRR, Pref@k and mean ranks.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from rankers.base import RANKING_COLUMNS, Ranking
from rankers.trec import RUN_FIELDS, TrecFileError, read_run

@dataclass(frozen=True)
class RunCoverage:
    """How a run meets the pool (see the module docstring for the rule).

    ``per_query``: one row per pool query with ``ranked_in_pool``, ``unranked_in_pool``,
    ``ranked_outside_pool``; ``uncovered_qids``: pool queries without any run line;
    ``extra_qids``: run qids outside the pool, dropped (only with ``allow_extra_qids``).
    """

    per_query: pd.DataFrame
    uncovered_qids: tuple[str, ...]
    extra_qids: tuple[str, ...]
    n_extra_lines: int
    #: Run lines per dropped extra qid.
    extra_lines: dict[str, int] = field(default_factory=dict)

    def totals(self) -> dict[str, int]:
        return {"pool_queries": len(self.per_query),
                "pool_passages": int(self.per_query[["ranked_in_pool", "unranked_in_pool"]].to_numpy().sum()),
                "ranked_in_pool": int(self.per_query["ranked_in_pool"].sum()),
                "unranked_in_pool": int(self.per_query["unranked_in_pool"].sum()),
                "ranked_outside_pool": int(self.per_query["ranked_outside_pool"].sum()),
                "uncovered_queries": len(self.uncovered_qids),
                "extra_qids": len(self.extra_qids),
                "extra_qid_lines": self.n_extra_lines}


def run_qids(path: str | Path) -> dict[str, int]:
    """Each qid of a run file's run lines (six fields) -> the line it first appears on, in file order.

    Reads the first field only, so checking a run's qids before any work costs a fraction of reading it; a line
    that is no run line is left to ``read_run``, which names it when the run is read.
    """
    first: dict[str, int] = {}
    with Path(path).open(encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            fields = line.split()
            if len(fields) == len(RUN_FIELDS):
                first.setdefault(fields[0], number)
    return first


def split_problem(path: str | Path, split: str, qids: Mapping[str, int], split_of: Mapping[str, str],
                  ignore_other_splits: bool) -> str | None:
    """Why a run file read for ``split`` does not fit it (None: it does), naming the file, the first offending line
    and its qid: a qid that is no direction of any split, one of another split (unless ``ignore_other_splits``),
    or no qid of the split at all. ``qids`` maps each qid to its first line (``run_qids``)."""
    unknown = [q for q in qids if q not in split_of]
    other = [] if ignore_other_splits else [q for q in qids if q in split_of and split_of[q] != split]
    if unknown:
        first = min(unknown, key=qids.__getitem__)
        return (f"run file {path}:{qids[first]}: qid {first!r} is no NevIR direction of any split ({len(unknown)} "
                "such qid(s); qids are '<NevIR pair id>_q1' and '_q2', as in the exported queries and qrels)")
    if other:
        first = min(other, key=qids.__getitem__)
        splits = sorted({split_of[q] for q in other})
        return (f"run file {path}:{qids[first]}: qid {first!r} is a direction of split {split_of[first]!r}, but the "
                f"file is read for split {split!r} ({len(other)} qid(s) of other splits {splits}); use one file per "
                "split ({split} in path), or declare other_splits = \"ignore\" to drop them (counted)")
    if qids and not any(split_of.get(q) == split for q in qids):
        return f"run file {path} holds no qid of split {split!r}: every direction would be a tie"
    return None


def trec_run_ranking(path: str | Path, reference: Ranking, name: str, *,
                     allow_extra_qids: bool = False) -> tuple[Ranking, RunCoverage]:
    """The run's ranking over ``reference``'s pool (its (qid, pid) rows, its order for unranked passages)."""
    run = read_run(path)
    pool = reference.frame[["qid", "pid", "rank"]].rename(columns={"rank": "ref_rank"})
    pool_qids = pd.unique(pool["qid"])
    extra = sorted(set(run["qid"].unique()) - set(pool_qids))
    if extra and not allow_extra_qids:
        raise TrecFileError(f"{path}: {len(extra)} run qids are not queries of the pool of {reference.name!r}, "
                           f"e.g. {extra[:5]}; is the run from another split or query-id scheme? "
                           "(allow_extra_qids drops them and counts them)")
    extra_lines = run.loc[run["qid"].isin(extra), "qid"].value_counts()
    run = run[~run["qid"].isin(extra)]

    # Both sides are unique per (qid, pid): the reference as a Ranking, the run as read.
    merged = pool.merge(run[["qid", "pid", "rank", "score"]], on=["qid", "pid"], how="left")
    ranked = merged["score"].notna().to_numpy()
    in_pool = run.merge(pool[["qid", "pid"]], on=["qid", "pid"], how="left", indicator=True)["_merge"].eq("both")
    outside = run.loc[~in_pool.to_numpy(), "qid"].value_counts()

    frame = merged.assign(
        k0=np.where(ranked, 1.0, 0.0),
        k1=np.where(ranked, merged["score"].to_numpy(dtype=float), 0.0),
        k2=0.0,
        # Position: ranked first by score desc, run rank, pid; then unranked by reference rank.
        _score=np.where(ranked, -merged["score"].to_numpy(dtype=float), 0.0),
        _run_rank=np.where(ranked, merged["rank"].to_numpy(dtype=float), 0.0),
        _ref_rank=np.where(ranked, 0, merged["ref_rank"].to_numpy()),
    )
    frame["_group"] = np.where(ranked, 0, 1)
    frame = frame.sort_values(["qid", "_group", "_score", "_run_rank", "_ref_rank", "pid"], kind="mergesort")
    frame["rank"] = frame.groupby("qid", sort=False).cumcount() + 1
    frame = frame.reset_index(drop=True)

    counts = pd.DataFrame({"qid": pool_qids})
    by_qid = pd.DataFrame({"ranked": ranked, "qid": merged["qid"]}).groupby("qid")["ranked"]
    counts["ranked_in_pool"] = counts["qid"].map(by_qid.sum()).astype(int)
    counts["unranked_in_pool"] = counts["qid"].map(by_qid.size()).astype(int) - counts["ranked_in_pool"]
    counts["ranked_outside_pool"] = counts["qid"].map(outside).fillna(0).astype(int)
    covered = set(run["qid"].unique())
    coverage = RunCoverage(counts, tuple(q for q in pool_qids if q not in covered), tuple(extra),
                           int(extra_lines.sum()), {str(q): int(n) for q, n in extra_lines.items()})
    info = {"run_file": str(path), "reference": reference.name, "tags": sorted(run["tag"].unique()),
            **coverage.totals()}
    return Ranking(name, frame[list(RANKING_COLUMNS)], frozenset(), info), coverage


def direction_coverage(ranking: Ranking, directions: pd.DataFrame) -> dict[str, int]:
    """Over eligible ``directions`` (qid, preferred_pid, counterpart_pid): which designated passages a run's
    ranking ranked (key ``k0 = 1``), and its ties by cause.

    A direction whose two designated passages the run left unranked is a tie by construction (both
    keys ``(0, 0, 0)``): the run said nothing about it. A tie between two ranked passages is the run's
    own equal scores. Both are failures of strict preference; the counts say which kind a run has.
    """
    keys = ranking.frame.set_index(["qid", "pid"])[["k0", "k1"]]
    pos = keys.reindex(pd.MultiIndex.from_arrays([directions["qid"], directions["preferred_pid"]])).to_numpy()
    neg = keys.reindex(pd.MultiIndex.from_arrays([directions["qid"], directions["counterpart_pid"]])).to_numpy()
    if np.isnan(pos).any() or np.isnan(neg).any():
        raise ValueError(f"ranking {ranking.name!r} lacks a designated passage of an eligible direction")
    pos_ranked, neg_ranked = pos[:, 0] == 1.0, neg[:, 0] == 1.0
    both, neither = pos_ranked & neg_ranked, ~pos_ranked & ~neg_ranked
    equal = both & (pos[:, 1] == neg[:, 1])
    return {"directions": len(directions), "both_ranked": int(both.sum()),
            "preferred_only_ranked": int((pos_ranked & ~neg_ranked).sum()),
            "counterpart_only_ranked": int((~pos_ranked & neg_ranked).sum()), "neither_ranked": int(neither.sum()),
            "ties": int((neither | equal).sum()), "ties_both_unranked": int(neither.sum()),
            "ties_equal_score": int(equal.sum())}
