"""Output tables (``docs/protocol.md#outputs``): per-direction outcomes, Table II, Table III (pair-only vs
window) and the per-judgment export of every text scorer.

``directions.csv`` keeps every planned direction, eligible or not, so anyone can
recount Table I and Table II from it; outcomes of non-eligible directions are NA,
never False or 0.
"""
from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pandas as pd

from fixtures.datasets.study import CARRIED
from fixtures.populations import eligible_directions
from reports.measures import TABLE3, TABLE3_COLUMNS, pair_only_row

#: ``directions.csv``'s columns before each ranker's outcome columns: a contract file of its own, not a report
#: table (docs/protocol.md#outputs).
DIRECTION_BASE_COLUMNS = ("qid", "pair_id", "direction", "split", "group", "preferred_pid", "counterpart_pid",
                          "eligible", "conflict", "covered")
RANKER_FIELDS = {"strict": "boolean", "rank_pos": "Int64", "rank_neg": "Int64", "tie": "boolean", "fallback": "boolean"}
#: Fewer directions than this leave a source-group bootstrap too few groups to resample: its interval is printed
#: with a note (``interval_note``) in every table, report and figure, never as a bare number pair.
RELIABLE_N = 20


def interval_note(n: object, lo: object, hi: object) -> str:
    """``"(n=4: interval unreliable)"`` beside an interval that cannot be read as one, else ``""``.

    Unreliable: fewer than ``RELIABLE_N`` directions, or zero width (every resample gave the same value,
    e.g. 4 of 4 right gives [100, 100]), which says nothing about the uncertainty of the rate.
    """
    if lo is None or hi is None or pd.isna(lo) or pd.isna(hi):
        return ""
    count = None if n is None or pd.isna(n) else int(n)
    if (count is not None and count < RELIABLE_N) or lo == hi:
        return f"(n={count if count is not None else '?'}: interval unreliable)"
    return ""


def directions_table(directions_annotated: pd.DataFrame, outcomes_by_ranker: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per planned direction, the data set's own fields (``data.<field>``) and each ranker's
    ``<ranker>__<field>`` outcome columns (NA if not eligible)."""
    missing = [c for c in DIRECTION_BASE_COLUMNS if c not in directions_annotated.columns]
    if missing:
        raise ValueError(f"directions frame lacks {missing}: annotate it with a pool first")
    carried = [c for c in directions_annotated.columns if str(c).startswith(CARRIED)]  # the data set's own fields
    table = directions_annotated[[*DIRECTION_BASE_COLUMNS, *carried]].reset_index(drop=True)
    eligible = set(eligible_directions(directions_annotated)["qid"])
    for name, outcomes in outcomes_by_ranker.items():
        if "__" in name:
            raise ValueError(f"ranker name {name!r} must not contain '__' (column separator)")
        stray = set(outcomes["qid"]) - eligible
        if stray:
            raise ValueError(f"outcomes of {name!r} include non-eligible qids, e.g. {sorted(stray)[:3]}")
        o = outcomes.set_index("qid")
        for field, dtype in RANKER_FIELDS.items():
            table[f"{name}__{field}"] = o[field].reindex(table["qid"].to_numpy()).astype(dtype).to_numpy()
    return table


def _scores_for(q: pd.DataFrame, directions_annotated: pd.DataFrame, scores: pd.Series | Sequence[float] | np.ndarray,
                what: str) -> np.ndarray:
    if isinstance(scores, pd.Series):
        if scores.index.duplicated().any():
            raise ValueError(f"{what} scores repeat qids, e.g. {scores.index[scores.index.duplicated()][:3].tolist()}")
        return scores.reindex(q["qid"].to_numpy()).to_numpy(dtype=float)
    values = np.asarray(scores, dtype=float)
    if values.shape != (len(directions_annotated),):
        raise ValueError(f"{what} scores: expected a qid-indexed Series or {len(directions_annotated)} values "
                         f"aligned with the directions frame, got shape {values.shape}")
    mask = np.asarray(directions_annotated["eligible"], dtype=bool)
    return values[mask]


def pair_only_outcomes(directions_annotated: pd.DataFrame, pos_scores: pd.Series | Sequence[float] | np.ndarray,
                       neg_scores: pd.Series | Sequence[float] | np.ndarray) -> pd.DataFrame:
    """L1 outcomes per eligible direction from the two designated passages' scores alone.

    Scores are a qid-indexed Series (absent qid = unavailable) or an array aligned
    with the rows of ``directions_annotated``. NaN/inf scores are unavailable; ties and
    unavailable directions are failures.
    """
    q = eligible_directions(directions_annotated)
    pos = _scores_for(q, directions_annotated, pos_scores, "preferred")
    neg = _scores_for(q, directions_annotated, neg_scores, "counterpart")
    available = np.isfinite(pos) & np.isfinite(neg)
    return pd.DataFrame({
        "qid": q["qid"].to_numpy(),
        "pos_score": pos,
        "neg_score": neg,
        "strict": available & (pos > neg),
        "tie": available & (pos == neg),
        "unavailable": ~available,
    })


def pair_only_summary(outcomes: pd.DataFrame, scorer: str) -> dict[str, object]:
    """One scorer's L1 values for Table III (``reports.measures.pair_only_row``): n, strict, strict_pct, ties,
    unavailable."""
    flags = {c: outcomes[c].to_numpy(dtype=float) for c in ("strict", "tie", "unavailable")}
    return {"scorer": scorer, **pair_only_row({"n": np.ones(len(outcomes)), **flags})}


def table3(l1_rows: Sequence[dict[str, object]], l2_rows: Sequence[dict[str, object]]) -> pd.DataFrame:
    """Pair-only (L1, ``pair_only_summary`` rows) beside window (L2, Table II rows) per scorer, in
    ``reports.measures.TABLE3``'s columns.

    L2 rows name their scorer under ``scorer`` (or ``ranker``); a scorer present on
    one side only (e.g. E0 as full-pool reference) gets NA on the other. Both sides
    must count the same Q_c.
    """
    l1_columns = {c.name: c.measure.name for c in TABLE3 if c.side != "l2"}
    l2_columns = {c.name if c.side else f"{c.name}_l2": c.measure.name for c in TABLE3 if c.side != "l1"}
    l1 = pd.DataFrame([{"scorer": r["scorer"], **{k: r[m] for k, m in l1_columns.items()}} for r in l1_rows],
                      columns=["scorer", *l1_columns])
    l2 = pd.DataFrame([{"scorer": r.get("scorer", r.get("ranker")), **{k: r[m] for k, m in l2_columns.items()}}
                       for r in l2_rows], columns=["scorer", *l2_columns])
    for side, frame in (("L1", l1), ("L2", l2)):
        if frame["scorer"].isna().any() or frame["scorer"].duplicated().any():
            raise ValueError(f"Table III {side} rows need unique scorer names, got {frame['scorer'].tolist()}")
    order = l1["scorer"].tolist() + [s for s in l2["scorer"] if s not in set(l1["scorer"])]
    merged = l1.merge(l2, on="scorer", how="outer").set_index("scorer").loc[order].reset_index()
    for shared in (c.name for c in TABLE3 if c.side is None):  # the Q_c both sides count
        clash = merged[shared].notna() & merged[f"{shared}_l2"].notna() & (merged[shared] != merged[f"{shared}_l2"])
        if clash.any():
            raise ValueError(f"Table III: L1 and L2 count different populations for "
                             f"{merged.loc[clash, 'scorer'].tolist()}")
        merged[shared] = merged[shared].fillna(merged[f"{shared}_l2"]).astype("Int64")
    for c in TABLE3:
        if c.side is not None and c.measure.aggregate == "count":
            merged[c.name] = merged[c.name].astype("Int64")
    return merged[list(TABLE3_COLUMNS)]


#: ``judgments.csv``: one row per judgment a window ranker read, with what its scorer stored beside the score.
JUDGMENTS_CSV_COLUMNS = ("ranker", "scope", "qid", "pid", "score", "rule_score", "grade", "grade_probs",
                         "grade_margin", "near_tie", "unavailable", "reason", "seconds", "endpoint", "raw_if_unavailable")


def judgments_table(frame: pd.DataFrame, ranker: str, scope: str, rule_scores: dict[tuple[str, str], float],
                    bounded: bool) -> pd.DataFrame:
    """A scorer's judgments of one scope (``ScoredInputs.frame``: qid, pid, score, error, usage, raw) as
    flat columns, one row per distinct (qid, pid).

    ``score`` is the stored judgment, ``rule_score`` what this ranker's window rule reads from it (the
    expected grade E[g] for a ``grade = "expected"`` ranker); ``grade`` is the score on a bounded grade
    scale. Probabilities (a JSON list p0..p4), margin and near-tie flag are the grader's, where it stored them;
    ``reason`` says why an unavailable judgment is unavailable, and its raw output is kept for auditing;
    ``endpoint`` is the server that gave the judgment (``docs/protocol.md#endpoints``), empty for in-process ones.
    """
    unique = frame.drop_duplicates(["qid", "pid"]).reset_index(drop=True)
    usage = [u if isinstance(u, dict) else {} for u in unique["usage"]]
    unavailable = unique["score"].isna().to_numpy()
    seconds = [u.get("seconds", u.get("latency_s", np.nan)) for u in usage]
    probs = [json.dumps(u["grade_probs"]) if isinstance(u.get("grade_probs"), list) else None for u in usage]
    return pd.DataFrame({
        "ranker": ranker, "scope": scope, "qid": unique["qid"], "pid": unique["pid"], "score": unique["score"],
        "rule_score": [rule_scores.get((q, p), np.nan) for q, p in zip(unique["qid"].tolist(), unique["pid"].tolist())],
        "grade": unique["score"] if bounded else np.nan, "grade_probs": probs,
        "grade_margin": [u.get("grade_margin", np.nan) for u in usage],
        "near_tie": pd.array([None if "near_tie" not in u else bool(u["near_tie"]) for u in usage], dtype="boolean"),
        "unavailable": unavailable, "reason": [e if u else None for e, u in zip(unique["error"].tolist(), unavailable)],
        "seconds": np.asarray(seconds, dtype=float),
        "endpoint": [u.get("endpoint") if isinstance(u.get("endpoint"), str) else None for u in usage],
        "raw_if_unavailable": [r if u else None for r, u in zip(unique["raw"].tolist(), unavailable)],
    }, columns=list(JUDGMENTS_CSV_COLUMNS))
