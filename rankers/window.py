"""Bounded window reranking: the one procedure every text scorer plugs into (docs/protocol.md#window-rule).

A pointwise text scorer reorders only the reference ranking's top k; text scores take
priority inside that head, the tie-breaker's score breaks text-score ties, and the
tail keeps the reference order. Keeping membership, tail and fallback in one place is
what makes the cross-encoder and the LLM grader comparable: they differ only in the
scores they supply.

The scorer side sees nothing but (query text, passage text): ``window_inputs`` and
``pair_inputs`` carry qid/pid only as cache bookkeeping for ``score_with_cache``,
which strips them before calling the scorer.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import numpy as np
import pandas as pd

from rankers.base import RANKING_COLUMNS, Ranking, strictly_greater

#: The paper's window size, fixed on the development pilot before any scoring (never tuned on Test).
WINDOW_K = 20


class TextInput(NamedTuple):
    """One input to score: ids for bookkeeping, texts for the scorer."""

    qid: str
    pid: str
    query: str
    passage: str


def _single_score(ranking: Ranking, role: str) -> pd.DataFrame:
    """(qid, pid, rank, k0) of a single-score ranking; a multi-key ranking has no one score to reuse."""
    frame = ranking.frame
    if not ((frame["k1"] == 0).all() and (frame["k2"] == 0).all()):
        raise ValueError(f"{role} ranking {ranking.name!r} is not a single-score ranking (k1/k2 non-zero); "
                         "window reranking reuses its k0 as the score")
    return frame[["qid", "pid", "rank", "k0"]]


def _head(reference: Ranking, k: int) -> pd.DataFrame:
    if k < 1:
        raise ValueError(f"window size k must be >= 1, got {k}")
    frame = _single_score(reference, "reference")
    return frame[frame["rank"] <= k]


def window_inputs(reference: Ranking, queries: Mapping[str, str], corpus: Mapping[str, str],
                  k: int = WINDOW_K) -> list[TextInput]:
    """Inputs of every query's head (the reference's top k), ordered by qid then reference rank."""
    head = _head(reference, k).sort_values(["qid", "rank"], kind="mergesort")
    qids, pids = head["qid"].tolist(), head["pid"].tolist()
    missing_q = sorted(set(qids) - set(queries))
    if missing_q:
        raise KeyError(f"window_inputs: {len(missing_q)} qids of ranking {reference.name!r} have no query text, "
                       f"e.g. {missing_q[:3]}")
    missing_p = sorted(set(pids) - set(corpus))
    if missing_p:
        raise KeyError(f"window_inputs: {len(missing_p)} pids of ranking {reference.name!r} are not in the corpus, "
                       f"e.g. {missing_p[:3]}")
    return [TextInput(q, p, queries[q], corpus[p]) for q, p in zip(qids, pids)]


def pair_inputs(directions: pd.DataFrame, corpus: Mapping[str, str]) -> list[TextInput]:
    """Pair-only (L1) inputs: each direction's preferred then counterpart passage.

    The scorer still sees each (query, passage) on its own; the pair only decides which
    inputs exist, and identical inputs are shared with the window through the cache.
    """
    out: list[TextInput] = []
    for row in directions[["qid", "query", "preferred_pid", "counterpart_pid"]].itertuples(index=False):
        for pid in (row.preferred_pid, row.counterpart_pid):
            if pid not in corpus:
                raise KeyError(f"pair_inputs: direction {row.qid!r} names passage {pid!r}, absent from the corpus")
            out.append(TextInput(row.qid, pid, row.query, corpus[pid]))
    return out


def _lookup(text_scores: Mapping[tuple[str, str], float], head: pd.DataFrame) -> np.ndarray:
    """Text score per head row; NaN where the mapping has none."""
    if not len(text_scores):
        return np.full(len(head), np.nan)
    series = pd.Series(text_scores, dtype=float)
    index = pd.MultiIndex.from_arrays([head["qid"].to_numpy(), head["pid"].to_numpy()])
    return series.reindex(index).to_numpy(dtype=float)


def window_rerank(reference: Ranking, text_scores: Mapping[tuple[str, str], float], k: int = WINDOW_K,
                  name: str = "window", tie_breaker: Ranking | None = None) -> Ranking:
    """Rerank each query's top k of ``reference`` by text score (docs/protocol.md#window-rule, paper §IV).

    Head: text score desc, then the tie-breaker's k0 desc (default: the reference,
    i.e. fusion), then pid asc; keys ``(1, s_text, s_tiebreak)``. Tail: reference order,
    keys ``(0, 0, s_reference)``. A query with any missing or non-finite head score keeps
    the reference order and the reference's own keys, and is listed in ``fallback`` —
    it stays in every denominator.
    """
    if k < 1:
        raise ValueError(f"window size k must be >= 1, got {k}")
    ref = _single_score(reference, "reference").sort_values(["qid", "rank"], kind="mergesort").reset_index(drop=True)
    in_head = (ref["rank"] <= k).to_numpy()
    head = ref[in_head]

    text = _lookup(text_scores, head)
    bad_qids = pd.unique(head["qid"].to_numpy()[~np.isfinite(text)])
    fallback = frozenset(str(q) for q in bad_qids)

    if tie_breaker is None:
        tiebreak = head["k0"].to_numpy(dtype=float)
    else:
        tb = _single_score(tie_breaker, "tie-breaker").set_index(["qid", "pid"])["k0"]
        index = pd.MultiIndex.from_arrays([head["qid"].to_numpy(), head["pid"].to_numpy()])
        tiebreak = tb.reindex(index).to_numpy(dtype=float)
        if not np.isfinite(tiebreak).all():
            lost = head.loc[~np.isfinite(tiebreak), ["qid", "pid"]].head(3).to_dict("records")
            raise ValueError(f"tie-breaker {tie_breaker.name!r} lacks head candidates of {reference.name!r}, e.g. {lost}")

    out = ref.assign(k0=0.0, k1=0.0, k2=ref["k0"].to_numpy(dtype=float))
    out.loc[in_head, "k0"] = 1.0
    out.loc[in_head, "k1"] = text
    out.loc[in_head, "k2"] = tiebreak
    is_fb = out["qid"].isin(fallback).to_numpy()
    if is_fb.any():
        # The reference is single-score, so its own keys are (k0, 0, 0).
        out.loc[is_fb, "k0"] = ref.loc[is_fb, "k0"].to_numpy()
        out.loc[is_fb, ["k1", "k2"]] = 0.0

    # Reorder only the scored heads; tail and fallback rows keep their reference rank,
    # and a head occupies ranks 1..len(head), so the positions never collide.
    scored = in_head & ~is_fb
    reordered = out[scored].sort_values(["qid", "k1", "k2", "pid"], ascending=[True, False, False, True],
                                        kind="mergesort")
    out.loc[reordered.index, "rank"] = reordered.groupby("qid", sort=False).cumcount().to_numpy() + 1
    out = out.sort_values(["qid", "rank"], kind="mergesort").reset_index(drop=True)
    info = {"k": k, "reference": reference.name,
            "tie_breaker": reference.name if tie_breaker is None else tie_breaker.name,
            "n_fallback": len(fallback)}
    return Ranking(name, out[list(RANKING_COLUMNS)], fallback, info)



def designated_outcomes(reference: Ranking, text_scores: Mapping[tuple[str, str], float], directions: pd.DataFrame,
                        k: int = WINDOW_K, tie_breaker: Ranking | None = None) -> pd.DataFrame:
    """Outcomes of the window rule read from each direction's two designated passages' scores alone
    (docs/protocol.md#designated-mode).

    The strict comparison of ``window_rerank`` depends only on the two designated
    passages: whether each lies in the reference's top k (window membership comes from the
    reference, not from text), their text scores, and the tie-breaker's and reference's
    scores. Where every score of the window is available, this gives the window's strict
    preference and ties exactly. It differs from the window rule in one documented way:
    the window falls back to the reference order when *any* of its k head scores is
    unavailable, while designated mode knows only the two designated scores and falls back
    only when one of *those* is (a "designated fallback", counted in ``fallback``). A
    direction whose window would fall back for another passage's unavailable score is
    therefore decided by the text scores here and by the reference there. Positions in the
    reranked list are unknown: ``rank_pos``/``rank_neg`` are NA. ``directions`` holds
    eligible directions (qid, preferred_pid, counterpart_pid).
    """
    if k < 1:
        raise ValueError(f"window size k must be >= 1, got {k}")
    ref = _single_score(reference, "reference").set_index(["qid", "pid"])
    qid = directions["qid"].astype(str).to_numpy()
    sides = {}
    for side, column in (("pos", "preferred_pid"), ("neg", "counterpart_pid")):
        index = pd.MultiIndex.from_arrays([qid, directions[column].astype(str).to_numpy()])
        rank = ref["rank"].reindex(index).to_numpy(dtype=float)
        if np.isnan(rank).any():
            lost = qid[np.isnan(rank)][:3].tolist()
            raise ValueError(f"designated passages of {lost} are not in reference {reference.name!r}")
        s_ref = ref["k0"].reindex(index).to_numpy(dtype=float)
        if tie_breaker is None:
            s_tie = s_ref
        else:
            tb = _single_score(tie_breaker, "tie-breaker").set_index(["qid", "pid"])["k0"]
            s_tie = tb.reindex(index).to_numpy(dtype=float)
        text = _lookup(text_scores, pd.DataFrame({"qid": qid, "pid": directions[column].astype(str).to_numpy()}))
        sides[side] = (rank <= k, s_ref, s_tie, text)
    (head_p, ref_p, tie_p, text_p), (head_n, ref_n, tie_n, text_n) = sides["pos"], sides["neg"]
    fallback = (head_p & ~np.isfinite(text_p)) | (head_n & ~np.isfinite(text_n))

    def keys(head: np.ndarray, s_ref: np.ndarray, s_tie: np.ndarray, text: np.ndarray) -> np.ndarray:
        windowed = np.where(head[:, None], np.column_stack([np.ones_like(s_ref), text, s_tie]),
                            np.column_stack([np.zeros_like(s_ref), np.zeros_like(s_ref), s_ref]))
        return np.where(fallback[:, None], np.column_stack([s_ref, np.zeros_like(s_ref), np.zeros_like(s_ref)]),
                        windowed)

    kp, kn = keys(head_p, ref_p, tie_p, text_p), keys(head_n, ref_n, tie_n, text_n)
    out = pd.DataFrame({
        "qid": qid,
        "rank_pos": pd.array([pd.NA] * len(qid), dtype="Int64"),
        "rank_neg": pd.array([pd.NA] * len(qid), dtype="Int64"),
        "strict": strictly_greater(kp, kn),
        "tie": (kp == kn).all(axis=1),
        "fallback": fallback,
    })
    return out
