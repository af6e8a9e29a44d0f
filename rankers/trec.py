"""TREC run and qrels files: the one writer and the one reader (docs/protocol.md#outputs, #trec-runs).

Every TREC file the suite writes (published ``runs/<ranker>.trec`` and ``qrels.txt``, the export's
``candidates.trec``, ``runs/<route>.trec`` and ``qrels.txt``) and every one it reads (a ``trec_run``
ranker's file, the files the MRR recheck reads back) goes through here. It sits at the rankers layer
because a ``trec_run`` ranker reads runs and rankers never import reports.

A run's score is the ranker's own score key (docs/protocol.md#trec-runs): its score, written exactly, for a ranker
with one score (fusion, LambdaMART, a TREC run's single score: the key is (score, 0, 0)), else the dense rank of its
key (k0, k1, k2) within the query (1 the lowest: a window ranker's (1, text score, tie-breaker score) above (0, 0,
reference score)). Equal scores are exactly the ranker's ties, which fail strict preference, so NevIR's rule read
from the file (the preferred passage's score strictly above its counterpart's) gives Table II's strict preference,
ties and paired accuracy. The ``rank`` column is the list position (Table II's ranks: ties in the ranker's own
order, passage id ascending for the suite's rankers): trec_eval and ir_measures ignore it and break equal scores by
document id descending, so a tool reproducing MRR, Pref@k or nDCG@10 orders each query by the rank column (or by
score descending, then passage id ascending). A route's own results (the export's ``runs/<route>.trec``) keep the
route's score as it stands: they are what it retrieved.

A file is read strictly: whitespace-separated fields, a fixed number per non-blank line, an
integer rank or relevance, a finite score, each (qid, pid) at most once, at least one line; any
violation is a ``TrecFileError`` naming the file and line.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from fixtures.populations import eligible_directions
from rankers.base import KEY_COLUMNS, Ranking

RUN_FIELDS = ("qid", "q0", "pid", "rank", "score", "tag")
QRELS_FIELDS = ("qid", "iteration", "pid", "relevance")


class TrecFileError(ValueError):
    """A TREC file that cannot be read or does not fit the pool; the message names the file (and line)."""


def _write_lines(path: Path, lines: pd.Series | list[str]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines), encoding="utf-8")
    return path


def write_qrels(directions_annotated: pd.DataFrame, path: Path) -> Path:
    """The one qrels convention, for the published and the exported ``qrels.txt`` alike: one line per eligible
    direction (sorted by qid), ``qid 0 preferred_pid 1`` (docs/protocol.md#outputs).

    Only eligible directions are judged (docs/protocol.md#populations), while a run file holds every pool
    query: a tool that insists on the same queries on both sides (ranx) needs ``make_comparable=True``."""
    q = eligible_directions(directions_annotated).sort_values("qid", kind="mergesort")
    return _write_lines(path, q["qid"].astype(str) + " 0 " + q["preferred_pid"].astype(str) + " 1\n")


def score_keys(frame: pd.DataFrame) -> pd.Series:
    """The run file's score of each row of a ranking frame: the score itself, exactly as a Python float prints, when
    every key is (score, 0, 0); else the dense rank of the key (k0, k1, k2) within its query, 1 the lowest, equal keys
    equal (the module doc)."""
    keys = frame[list(KEY_COLUMNS)].to_numpy(dtype=float)
    if not keys[:, 1:].any():
        return frame["k0"].astype(float).map(repr)
    query = pd.factorize(frame["qid"])[0]
    order = np.lexsort((keys[:, 2], keys[:, 1], keys[:, 0], query))  # by query, then key ascending
    q, k = query[order], keys[order]
    first = np.r_[True, q[1:] != q[:-1]]
    step = first | np.r_[True, (k[1:] != k[:-1]).any(axis=1)]
    dense = np.empty(len(order), dtype=np.int64)
    dense[order] = pd.Series(step.astype(np.int64)).groupby(q).cumsum().to_numpy()
    return pd.Series(dense, index=frame.index).astype(str)


def write_run(ranking: Ranking, path: Path, tag: str | None = None, own_scores: bool = False) -> Path:
    """``qid Q0 pid rank score tag`` per row of the ranking.

    By default the full pool of every query in final order (ranks must be 1..pool_size) with the ranker's score key
    (``score_keys``: ties stay ties). ``own_scores`` writes the rows as they stand with the ranking's own score
    (``k0``, exactly as a Python float prints), for a route's results.
    """
    tag = ranking.name if tag is None else tag
    if not tag or any(ch.isspace() for ch in tag):
        raise ValueError(f"run tag {tag!r} must be non-empty without whitespace (TREC run format)")
    f = ranking.frame
    if own_scores:
        return _write_lines(path, [f"{q} Q0 {p} {r} {s!r} {tag}\n" for q, p, r, s in
                                   zip(f["qid"], f["pid"], f["rank"], f["k0"].astype(float))])
    f = f.sort_values(["qid", "rank"], kind="mergesort")
    rank = f["rank"].to_numpy(dtype=np.int64)
    expected = f.groupby("qid", sort=False).cumcount().to_numpy() + 1
    if not np.array_equal(rank, expected):
        bad = f.loc[rank != expected, "qid"].iloc[0]
        raise ValueError(f"ranking {ranking.name!r}: ranks of qid {bad} are not 1..pool_size")
    return _write_lines(path, f["qid"].astype(str) + " Q0 " + f["pid"].astype(str) + " "
                        + pd.Series(rank, index=f.index).astype(str) + " " + score_keys(f) + " " + tag + "\n")


def read_run(path: str | Path) -> pd.DataFrame:
    """A TREC run as [qid, pid, rank (int), score (float), tag].

    A vectorized read serves well-formed files (a Test run has about half a million lines);
    any file it does not fully accept is rescanned line by line, which names the first bad line.
    """
    path = Path(path)
    if not path.is_file():
        raise TrecFileError(f"TREC run file not found: {path}")
    try:
        # No names: a line with extra fields must not silently become an index column.
        frame = pd.read_csv(path, sep=r"\s+", header=None, dtype=str, engine="c", keep_default_na=False,
                            na_values=[], skip_blank_lines=True, encoding="utf-8")
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError):
        return _scan_run(path)
    if frame.shape[1] != len(RUN_FIELDS):
        return _scan_run(path)
    frame = frame.set_axis(list(RUN_FIELDS), axis=1)
    rank_text = frame["rank"].astype(str)
    score = pd.to_numeric(frame["score"], errors="coerce").to_numpy(dtype=float)
    malformed = (len(frame) == 0 or frame.isna().to_numpy().any() or frame.eq("").to_numpy().any()
                 or not rank_text.str.fullmatch(r"[+-]?\d+").all() or not np.isfinite(score).all())
    if malformed or frame.duplicated(["qid", "pid"]).any():
        return _scan_run(path)
    return pd.DataFrame({"qid": frame["qid"], "pid": frame["pid"], "rank": rank_text.astype(np.int64),
                         "score": score, "tag": frame["tag"]})


def _scan(path: Path, fields: tuple[str, ...], what: str) -> list[tuple[int, list[str]]]:
    """(line number, fields) of every non-blank line, each with ``len(fields)`` fields."""
    found: list[tuple[int, list[str]]] = []
    with path.open(encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != len(fields):
                raise TrecFileError(f"{path}:{number}: expected {len(fields)} fields {fields}, "
                                    f"got {len(parts)}: {line.rstrip()!r}")
            found.append((number, parts))
    if not found:
        raise TrecFileError(f"{path}: no {what} lines")
    return found


def _integer(path: Path, number: int, name: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise TrecFileError(f"{path}:{number}: {name} {text!r} is not an integer") from None


def _scan_run(path: Path) -> pd.DataFrame:
    """Line-by-line read with an error naming the file and line of the first violation."""
    rows: list[tuple[str, str, int, float, str]] = []
    first_line: dict[tuple[str, str], int] = {}
    for number, (qid, _, pid, rank_text, score_text, tag) in _scan(path, RUN_FIELDS, "run"):
        rank = _integer(path, number, "rank", rank_text)
        try:
            score = float(score_text)
        except ValueError:
            raise TrecFileError(f"{path}:{number}: score {score_text!r} is not a number") from None
        if not math.isfinite(score):
            raise TrecFileError(f"{path}:{number}: score {score_text!r} is not finite")
        earlier = first_line.setdefault((qid, pid), number)
        if earlier != number:
            raise TrecFileError(f"{path}:{number}: duplicate (qid, pid) ({qid}, {pid}), first on line {earlier}")
        rows.append((qid, pid, rank, score, tag))
    return pd.DataFrame(rows, columns=["qid", "pid", "rank", "score", "tag"])


def read_qrels(path: str | Path) -> pd.DataFrame:
    """TREC qrels as [qid, iteration, pid, relevance (int)]."""
    path = Path(path)
    if not path.is_file():
        raise TrecFileError(f"TREC qrels file not found: {path}")
    rows = [(qid, iteration, pid, _integer(path, number, "relevance", relevance))
            for number, (qid, iteration, pid, relevance) in _scan(path, QRELS_FIELDS, "qrels")]
    return pd.DataFrame(rows, columns=list(QRELS_FIELDS))
