"""MRR recomputed from the TREC files alone (docs/protocol.md#trec-runs), as a re-checker reads them.

The files are written and read by ``rankers.trec`` (the one TREC writer and reader); this is the
independent check that the published files reproduce the position measures.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from rankers.trec import TrecFileError, read_qrels, read_run


def mrr_from_files(run_path: Path, qrels_path: Path) -> float:
    """Reciprocal rank of the first relevant passage, averaged over qrels queries, from the files alone.

    Positions are the file's rank column, which must order each query by score, descending: equal scores are the
    ranker's ties and sit in its own order there, which no re-sort by score could recover (trec_eval's puts the
    larger document id first); a qrels query the run misses counts 0 (trec_eval ``-c``).
    """
    run = read_run(run_path).sort_values(["qid", "rank"], kind="mergesort")
    same = run["qid"].to_numpy()[1:] == run["qid"].to_numpy()[:-1]
    rising = same & (np.diff(run["score"].to_numpy()) > 0)
    if rising.any():
        bad = run.iloc[int(np.flatnonzero(rising)[0]) + 1]
        raise TrecFileError(f"{run_path}: qid {bad['qid']}: rank {bad['rank']} scores above the rank before it; a run's "
                            "ranks must follow its scores")
    qrels = read_qrels(qrels_path)
    relevant = qrels[qrels["relevance"] > 0]
    queries = qrels["qid"].unique()  # at least one: read_qrels refuses a file without lines
    hits = run.merge(relevant[["qid", "pid"]], on=["qid", "pid"])
    first = hits.groupby("qid")["rank"].min()
    rr = (1.0 / first).reindex(queries, fill_value=0.0)
    return float(rr.mean())
