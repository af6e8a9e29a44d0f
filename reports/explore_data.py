"""The explorer page's data: everything one split's page shows, as compact JSON (docs/protocol.md#outputs).

``page_data`` is a pure function of ``ExploreInputs``; ``reports.explore`` gathers the inputs from
a run's record and writes the page, so the page a user opens and the page the browser test
drives come from the same code. Outcomes, branches and flags are coded as short strings and
runs of equal values, so a full split's page stays well under the published-file limit.
"""
from __future__ import annotations

import base64
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from rankers.base import Ranking
from rankers.window import WINDOW_K
from reports.measures import PAIRED_MEASURES, TABLE2, shown_in
from reports.columns import COUNT, POPULATION, BaselineMeasure
from reports.sequential import StoppingPoint


#: Passages of the pool shown per direction, in the reference ranker's order: the window the rerankers see.
POOL_TOP = WINDOW_K
#: Outcome codes in the page: not evaluated on the direction, strict success, wrong order, tie.
NOT_EVALUATED, SUCCESS, WRONG, TIE = 0, 1, 2, 3
#: Branch codes of the tie-branch analysis (``reports.tie_branch.BRANCHES``), one letter per direction.
BRANCH_CODES = {"equal_score": "e", "different_score": "d", "outside_window_or_fallback": "o"}

@dataclass(frozen=True)
class ExploreInputs:
    """Everything one split's page shows; built by ``load_inputs`` from a run's tables and artifacts."""

    split: str
    meta: dict[str, Any]
    rankers: list[dict[str, Any]]
    table2: pd.DataFrame
    directions: pd.DataFrame
    queries: dict[str, str]
    passages: dict[str, str]
    claims: pd.DataFrame | None = None
    pairwise: pd.DataFrame | None = None
    pool_top: pd.DataFrame | None = None
    reference: str | None = None
    judgments: dict[str, pd.DataFrame] = field(default_factory=dict)  # ``judgments_table`` frames, per ranker
    branches: dict[str, pd.DataFrame] = field(default_factory=dict)
    figures: dict[str, bytes] = field(default_factory=dict)
    sequential: dict[str, StoppingPoint] = field(default_factory=dict)  # claim -> where its sequential sample stopped


def top_of(ranking: Ranking, k: int = POOL_TOP) -> pd.DataFrame:
    """The first ``k`` passages of every query of a ranking (qid, pid, rank): what the page shows of a pool."""
    frame = ranking.frame
    return frame.loc[frame["rank"] <= k, ["qid", "pid", "rank"]].reset_index(drop=True)


def _num(value: Any, digits: int = 6) -> float | int | None:
    """A JSON number rounded to ``digits`` significant digits; None for missing or non-finite values."""
    if value is None or value is pd.NA:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(v):
        return None
    if v == int(v) and abs(v) < 2**53:
        return int(v)
    return float(f"{v:.{digits}g}")


def _strings(values: pd.Series) -> list[str]:
    """A column as a list of Python strings (one conversion, not an iteration over an Arrow-backed column)."""
    return values.astype(str).tolist()


def _flags(values: pd.Series) -> list[int]:
    return values.fillna(False).to_numpy(dtype=bool).astype(int).tolist()


def _column(values: Any, digits: int = 6) -> list[float | int | None]:
    """``_num`` over a whole column, vectorized (a full Test page holds about half a million numbers)."""
    a = pd.to_numeric(pd.Series(values, copy=False), errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    finite = np.isfinite(a)
    v = a[finite]
    p = np.zeros(len(v), dtype=np.int64)
    nonzero = v != 0
    p[nonzero] = np.clip(digits - 1 - np.floor(np.log10(np.abs(v[nonzero]))).astype(np.int64), -300, 300)
    up = p >= 0  # divide by an exact power of ten, so each value prints as its shortest decimal
    rounded = np.where(up, np.round(v * 10.0 ** np.maximum(p, 0)) / 10.0 ** np.maximum(p, 0),
                       np.round(v / 10.0 ** np.maximum(-p, 0)) * 10.0 ** np.maximum(-p, 0))
    out = np.full(len(a), np.nan)
    out[finite] = rounded
    return [None if x != x else int(x) if x.is_integer() and abs(x) < 2**53 else x for x in out.tolist()]


def _sparse(values: list[Any]) -> list[Any] | dict[str, list[Any]]:
    """A mostly empty column (a sampled ranker's) as {"i": indices, "v": values}; the page expands it on load."""
    present = [i for i, v in enumerate(values) if v is not None]
    if 2 * len(present) >= len(values):
        return values
    return {"i": present, "v": [values[i] for i in present]}


def _records(frame: pd.DataFrame | None, columns: Sequence[str] | None = None) -> list[dict[str, Any]]:
    if frame is None or not len(frame):
        return []
    cols = [c for c in (columns or frame.columns) if c in frame.columns]
    out = []
    for row in frame[cols].to_dict("records"):
        out.append({k: (_num(v) if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
                        else None if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA
                        else v if isinstance(v, (bool, str)) else str(v))
                    for k, v in row.items()})
    return out


def _outcome_codes(directions: pd.DataFrame, name: str) -> tuple[str, str]:
    strict = directions[f"{name}__strict"]
    tie = directions[f"{name}__tie"]
    codes = np.where(strict.isna().to_numpy(), NOT_EVALUATED,
                     np.where(strict.fillna(False).to_numpy(dtype=bool), SUCCESS,
                              np.where(tie.fillna(False).to_numpy(dtype=bool), TIE, WRONG)))
    fallback = directions[f"{name}__fallback"].fillna(False).to_numpy(dtype=bool)
    return "".join(map(str, codes)), "".join("1" if f else "0" for f in fallback)


def _keyed(judgments: pd.DataFrame) -> pd.DataFrame:
    """A ``judgments_table`` frame indexed by (qid, pid) as strings, one row each (the first, as the table keeps)."""
    frame = judgments.drop_duplicates(["qid", "pid"])
    return frame.set_index(pd.MultiIndex.from_arrays([frame["qid"].astype(str), frame["pid"].astype(str)],
                                                     names=["qid", "pid"]))


def _probabilities(values: pd.Series) -> np.ndarray:
    """The grader's five grade probabilities per row (``grade_probs``, a JSON list), NaN where it stored none."""
    out = np.full((len(values), 5), np.nan)
    for i, text in enumerate(values):
        probs = json.loads(text) if isinstance(text, str) else None
        if isinstance(probs, list) and len(probs) == 5:
            out[i] = probs
    return out


def table2_columns() -> list[dict[str, Any]]:
    """The Table II columns the page shows, described for explore.js (which lists none of its own): name, heading,
    digits, how the value is written (``int``, ``fixed``, ``interval``, ``signed`` with its interval), the interval's
    columns, and whether it compares with the row's baseline."""
    out = []
    for m in shown_in("explorer"):
        bounds = m.bounds if "explorer" not in m.bare else None
        baseline = isinstance(m, BaselineMeasure)
        how = ("int" if m.unit in (COUNT, POPULATION) else "fixed" if bounds is None
               else "signed" if baseline else "interval")
        out.append({"name": m.name, "label": m.label, "digits": m.digits, "format": how,
                    "lo": bounds[0] if bounds else None, "hi": bounds[1] if bounds else None, "baseline": baseline})
    return out


def page_data(inputs: ExploreInputs) -> dict[str, Any]:
    """The JSON the page embeds: columnar arrays aligned with the directions table, texts stored once."""
    d = inputs.directions
    qids = _strings(d["qid"])
    passage_index: dict[str, int] = {}

    def pidx(pid: str) -> int:
        if pid not in passage_index:
            passage_index[pid] = len(passage_index)
        return passage_index[pid]

    query_texts: dict[str, int] = {}
    query_of = [query_texts.setdefault(inputs.queries.get(q, ""), len(query_texts)) for q in qids]
    data: dict[str, Any] = {
        "meta": {**inputs.meta, "n_directions": len(d), "reference": inputs.reference, "pool_top": POOL_TOP},
        "rankers": inputs.rankers,
        "table2": _records(inputs.table2, ("ranker", *(m.name for m in TABLE2))),
        "table2_columns": table2_columns(),
        "position_measures": {m.name: m.position for m in PAIRED_MEASURES},
        "claims": _records(inputs.claims),
        "pairwise": _records(inputs.pairwise),
        "sequential": {claim: point.record() for claim, point in inputs.sequential.items()},
        "figures": [{"name": n, "src": "data:image/png;base64," + base64.b64encode(b).decode("ascii")}
                    for n, b in sorted(inputs.figures.items())],
        "dirs": {"qid": qids, "pair": _strings(d["pair_id"]), "dir": _strings(d["direction"]),
                 "group": _strings(d["group"]), "query": query_of,
                 "eligible": _flags(d["eligible"]), "covered": _flags(d["covered"]), "conflict": _flags(d["conflict"]),
                 "pos": [pidx(p) for p in _strings(d["preferred_pid"])],
                 "neg": [pidx(p) for p in _strings(d["counterpart_pid"])]},
        "outcomes": {}, "judgments": {}, "branches": {},
    }
    for r in inputs.rankers:
        name = r["name"]
        if f"{name}__strict" not in d.columns:
            continue
        codes, fallback = _outcome_codes(d, name)
        data["outcomes"][name] = {"o": codes, "f": fallback, "rp": _sparse(_column(d[f"{name}__rank_pos"])),
                                  "rn": _sparse(_column(d[f"{name}__rank_neg"]))}
    for name, frame in inputs.judgments.items():
        j = _keyed(frame)
        per_side = {}
        for side, column in (("p", "preferred_pid"), ("n", "counterpart_pid")):
            idx = pd.MultiIndex.from_arrays([d["qid"].astype(str), d[column].astype(str)])
            part = j.reindex(idx)
            per_side[f"s{side}"] = _column(part["rule_score"], 6)  # what the rule read, never recomputed here
            probs = _probabilities(part["grade_probs"])
            if np.isfinite(probs).any():
                per_side[f"g{side}"] = [None if any(v is None for v in row) else row for row in
                                        ([_num(v, 3) for v in vals] for vals in probs)]
                per_side[f"m{side}"] = _column(part["grade_margin"], 3)
                per_side[f"t{side}"] = _column(part["near_tie"])
            per_side[f"e{side}"] = [None if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)
                                    for v in part["reason"]]
        data["judgments"][name] = {k: _sparse(v) for k, v in per_side.items()}
    for name, frame in inputs.branches.items():
        b = frame.set_index("qid")["branch"].reindex(qids)
        data["branches"][name] = "".join(BRANCH_CODES.get(v, "-") if isinstance(v, str) else "-" for v in b)
    if inputs.pool_top is not None:
        data["pool"] = _pool_data(inputs, qids, pidx)
    data["passages"] = [inputs.passages.get(pid) for pid in passage_index]
    data["pids"] = list(passage_index)
    data["queries"] = list(query_texts)
    return data


def _pool_data(inputs: ExploreInputs, qids: list[str], pidx) -> dict[str, Any]:
    """Per direction, the top of its pool: offsets into flat arrays of passages, route scores and ranks, and the
    text score each window ranker gave each passage it saw."""
    top = inputs.pool_top
    top = top[top["qid"].astype(str).isin(set(qids))]
    by_qid = {q: (s, e) for q, s, e in _runs(np.asarray(_strings(top["qid"]), dtype=object))}
    order = np.concatenate([np.arange(*by_qid[q]) for q in qids if q in by_qid]) if by_qid else np.array([], int)
    top = top.iloc[order].reset_index(drop=True)
    start, cursor = [], 0
    for q in qids:
        s, e = by_qid.get(q, (0, 0))
        start.append(cursor)
        cursor += e - s
    start.append(cursor)
    routes = [c[:-6] for c in top.columns if c.endswith("_score")]
    out: dict[str, Any] = {"start": start, "pid": [pidx(p) for p in _strings(top["pid"])], "routes": routes,
                           "text": {}}
    for r in routes:
        out[f"{r}_score"] = _column(top[f"{r}_score"], 4)
        out[f"{r}_rank"] = _column(top[f"{r}_rank"])
    keys = pd.MultiIndex.from_arrays([top["qid"].astype(str), top["pid"].astype(str)])
    for name, frame in inputs.judgments.items():
        scores = _keyed(frame)["rule_score"].reindex(keys)
        if scores.notna().any():
            out["text"][name] = _sparse(_column(scores, 4))
    return out


def _runs(values: np.ndarray) -> list[tuple[str, int, int]]:
    """(value, start, end) of each run of equal consecutive values."""
    if not len(values):
        return []
    cuts = np.flatnonzero(values[1:] != values[:-1]) + 1
    bounds = np.concatenate([[0], cuts, [len(values)]])
    return [(str(values[s]), int(s), int(e)) for s, e in zip(bounds[:-1], bounds[1:])]
