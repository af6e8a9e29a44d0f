"""MRR recomputed from the TREC files alone (docs/protocol.md#outputs), as trec_eval would read them.

The files are written and read by ``rankers.trec`` (the one TREC writer and reader); this is the
independent check that the published files reproduce the position measures.
"""
from __future__ import annotations

from pathlib import Path

from rankers.trec import read_qrels, read_run


def mrr_from_files(run_path: Path, qrels_path: Path) -> float:
    """Reciprocal rank of the first relevant passage, averaged over qrels queries, from the files alone.

    Independent of our rank column: positions come from sorting each query by score
    descending with trec_eval's tie rule (document id descending); a qrels query the
    run misses counts 0 (trec_eval ``-c``).
    """
    run = read_run(run_path).sort_values(["qid", "score", "pid"], ascending=[True, False, False], kind="mergesort")
    run["position"] = run.groupby("qid", sort=False).cumcount() + 1
    qrels = read_qrels(qrels_path)
    relevant = qrels[qrels["relevance"] > 0]
    queries = qrels["qid"].unique()  # at least one: read_qrels refuses a file without lines
    hits = run.merge(relevant[["qid", "pid"]], on=["qid", "pid"])
    first = hits.groupby("qid")["position"].min()
    rr = (1.0 / first).reindex(queries, fill_value=0.0)
    return float(rr.mean())
