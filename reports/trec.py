"""TREC qrels and run files (docs/protocol.md#outputs), so trec_eval / ir_measures can recheck our position measures.

Run scores are written as ``pool_size - rank + 1`` rather than the ranker's own
score. trec_eval and ir_measures re-sort each query by score (breaking equal scores
by document id, descending in trec_eval), so writing raw fusion scores would let
them reorder our tied passages (which we order by id ascending) and report a
different MRR. A score strictly decreasing with rank makes the file's order
unambiguous: any tool reproduces exactly our list positions.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from fixtures.populations import eligible_directions
from rankers.base import Ranking

RUN_COLUMNS = ("qid", "q0", "pid", "rank", "score", "tag")
QRELS_COLUMNS = ("qid", "iteration", "pid", "relevance")


def write_qrels(directions_annotated: pd.DataFrame, path: Path) -> Path:
    """The one qrels convention, for the published and the exported ``qrels.txt`` alike: one line per eligible
    direction (sorted by qid), ``qid 0 preferred_pid 1`` (docs/protocol.md#outputs).

    Only eligible directions are judged (docs/protocol.md#populations), while a run file holds every pool
    query: a tool that insists on the same queries on both sides (ranx) needs ``make_comparable=True``."""
    q = eligible_directions(directions_annotated).sort_values("qid", kind="mergesort")
    return _write_lines(path, q["qid"].astype(str) + " 0 " + q["preferred_pid"].astype(str) + " 1\n")


def write_run(ranking: Ranking, path: Path, tag: str | None = None) -> Path:
    """The full pool of every query in final order: ``qid Q0 pid rank score tag``, score = pool_size - rank + 1."""
    tag = ranking.name if tag is None else tag
    if not tag or any(ch.isspace() for ch in tag):
        raise ValueError(f"run tag {tag!r} must be non-empty without whitespace (TREC run format)")
    f = ranking.frame.sort_values(["qid", "rank"], kind="mergesort")
    size = f.groupby("qid", sort=False)["pid"].transform("size").to_numpy()
    rank = f["rank"].to_numpy(dtype=np.int64)
    expected = f.groupby("qid", sort=False).cumcount().to_numpy() + 1
    if not np.array_equal(rank, expected):
        bad = f.loc[rank != expected, "qid"].iloc[0]
        raise ValueError(f"ranking {ranking.name!r}: ranks of qid {bad} are not 1..pool_size")
    lines = (f["qid"].astype(str) + " Q0 " + f["pid"].astype(str) + " " + pd.Series(rank, index=f.index).astype(str)
             + " " + pd.Series(size - rank + 1, index=f.index).astype(str) + " " + tag + "\n")
    return _write_lines(path, lines)


def _write_lines(path: Path, lines: pd.Series) -> Path:
    """Write newline-terminated lines to ``path``, its folder made if absent."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines), encoding="utf-8")
    return path


def _read_columns(path: Path, columns: tuple[str, ...]) -> pd.DataFrame:
    """Whitespace-separated fields as strings; on any malformed line, rescan to name it exactly."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"TREC file not found: {path}")
    try:
        frame = pd.read_csv(path, sep=r"\s+", header=None, dtype=str, engine="c", keep_default_na=False,
                            na_values=[], skip_blank_lines=True)
    except pd.errors.EmptyDataError:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
    except pd.errors.ParserError:
        frame = None
    if frame is not None and frame.shape[1] == len(columns) and not (frame.iloc[:, -1] == "").any():
        return frame.set_axis(list(columns), axis=1)
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        fields = line.split()
        if fields and len(fields) != len(columns):
            raise ValueError(f"{path}:{number}: expected {len(columns)} fields {columns}, got {len(fields)}: {line!r}")
    raise ValueError(f"{path}: unreadable as {len(columns)} whitespace-separated fields {columns}")


def _numeric(frame: pd.DataFrame, column: str, path: Path, kind: type) -> pd.Series:
    values = pd.to_numeric(frame[column], errors="coerce")
    if values.isna().any():
        i = int(np.flatnonzero(values.isna().to_numpy())[0])
        raise ValueError(f"{path}: record {i + 1} (non-blank line): field {column!r} is not numeric: {frame[column].iat[i]!r}")
    return values.astype(kind)


def read_run(path: Path) -> pd.DataFrame:
    """A TREC run as a frame [qid, q0, pid, rank (int), score (float), tag]."""
    f = _read_columns(path, RUN_COLUMNS)
    f["rank"] = _numeric(f, "rank", path, np.int64)
    f["score"] = _numeric(f, "score", path, float)
    dup = f.duplicated(["qid", "pid"])
    if dup.any():
        raise ValueError(f"{path}: record {int(np.flatnonzero(dup.to_numpy())[0]) + 1} (non-blank line): duplicate (qid, pid)")
    return f


def read_qrels(path: Path) -> pd.DataFrame:
    """TREC qrels as a frame [qid, iteration, pid, relevance (int)]."""
    f = _read_columns(path, QRELS_COLUMNS)
    f["relevance"] = _numeric(f, "relevance", path, np.int64)
    return f


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
    queries = qrels["qid"].unique()
    if len(queries) == 0:
        raise ValueError(f"{qrels_path}: no judged queries")
    hits = run.merge(relevant[["qid", "pid"]], on=["qid", "pid"])
    first = hits.groupby("qid")["position"].min()
    rr = (1.0 / first).reindex(queries, fill_value=0.0)
    return float(rr.mean())
