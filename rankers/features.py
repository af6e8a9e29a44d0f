"""The 38 pool features of the learned rankers E0 and background N=8 (``docs/protocol.md#lambdamart``).

Every feature is computed from the complete candidate pool of a query, so the
background candidates shape a designated passage's features (its within-query
normalized scores, fusion rank, gap to the top) even when only the designated pair
carries a training label. All features are computed column-wise over the whole pool
frame (pandas groupby transforms and sparse matrix products); only tokenization is a
per-text Python step, and it is cached per distinct text.

Fill rules (a feature must be finite for LightGBM and for the strict comparison):

- raw route score of a passage the route did not return: the lowest score that route
  returned for the query (the route placed it below everything it returned); 0 when
  the route returned nothing for the query;
- route rank of a passage the route did not return: the route's saved depth + 1;
- min-max normalized score of a missing passage: 0; a route whose returned scores
  are all equal gives 1.0 to each (the fusion rule, ``docs/protocol.md#fusion``);
- z-score: population standard deviation within the query; a missing passage takes
  the query's lowest returned z-score for that route; a constant route gives 0;
- lexical ratios with an empty denominator (a query without tokens or bigrams): 0.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd
from scipy import sparse

from fixtures.routes import POOL_COLUMNS, ROUTE_DEPTHS, ROUTES
from rankers.fusion import fusion_scores

#: Documented negation-cue lexicon: syntactic negators, negative quantifiers and a few
#: frequent lexical negators. Affixal negation (un-/in-/dis-) is left out on purpose:
#: those prefixes mostly do not negate (under, into, discuss), and a hand-picked word
#: list would encode guesses about NevIR's vocabulary.
NEGATION_CUES: frozenset[str] = frozenset({
    "not", "no", "never", "n't", "without", "none", "nor", "neither", "nobody", "nothing",
    "nowhere", "cannot", "lack", "lacks", "lacked", "lacking", "absent", "absence",
    "fail", "fails", "failed", "failing", "refuse", "refused", "refuses", "deny", "denied",
    "denies", "except", "unable",
})

_TOKEN = re.compile(r"n't|[a-z0-9]+")


@dataclass(frozen=True)
class Feature:
    """One column of the feature matrix: its name, family and why a ranker can use it."""

    name: str
    family: str
    why: str


FEATURES: tuple[Feature, ...] = (
    # -- route scores (raw) --------------------------------------------------------
    Feature("dense_score", "route_score", "cosine similarity of the dense route; semantic closeness"),
    Feature("sparse_score", "route_score", "learned-sparse dot product; expanded term matching"),
    Feature("bm25_score", "route_score", "negated FTS5 bm25; exact-term relevance"),
    # -- route ranks ----------------------------------------------------------------
    Feature("dense_rank", "route_rank", "position in the dense list (depth+1 if absent); scale-free"),
    Feature("sparse_rank", "route_rank", "position in the learned-sparse list (depth+1 if absent)"),
    Feature("bm25_rank", "route_rank", "position in the BM25 list (depth+1 if absent)"),
    # -- presence -------------------------------------------------------------------
    Feature("dense_present", "presence", "1 if the dense route returned the passage"),
    Feature("sparse_present", "presence", "1 if the learned-sparse route returned the passage"),
    Feature("bm25_present", "presence", "1 if the BM25 route returned the passage"),
    Feature("n_routes", "presence", "how many routes returned the passage; consensus of retrievers"),
    # -- route agreement -------------------------------------------------------------
    Feature("min_rank", "agreement", "best rank over routes (filled); the most confident route"),
    Feature("max_rank", "agreement", "worst rank over routes (filled); the least confident route"),
    Feature("rank_spread", "agreement", "max_rank - min_rank; disagreement between routes"),
    Feature("rr_sum", "agreement", "sum of 1/rank over returning routes; reciprocal-rank consensus"),
    # -- per-query normalized scores --------------------------------------------------
    Feature("dense_minmax", "normalized", "dense score min-max normalized within the query's returned scores"),
    Feature("sparse_minmax", "normalized", "sparse score min-max normalized within the query"),
    Feature("bm25_minmax", "normalized", "BM25 score min-max normalized within the query"),
    Feature("dense_z", "normalized", "dense score z-scored within the query; distance from the pool mean"),
    Feature("sparse_z", "normalized", "sparse score z-scored within the query"),
    Feature("bm25_z", "normalized", "BM25 score z-scored within the query"),
    # -- fixed fusion -----------------------------------------------------------------
    Feature("fusion_score", "fusion", "the fixed-fusion score (rankers.fusion); the reference ranker's view"),
    Feature("fusion_rank", "fusion", "1-based position under fusion (ties by passage id)"),
    Feature("fusion_gap_top", "fusion", "top fused score of the query minus this one; margin to the leader"),
    # -- lexical matching --------------------------------------------------------------
    Feature("query_overlap", "lexical", "share of the query's distinct tokens found in the passage"),
    Feature("passage_overlap", "lexical", "share of the passage's distinct tokens found in the query; focus"),
    Feature("idf_overlap", "lexical", "IDF-weighted share of query tokens in the passage (IDF over the split's corpus)"),
    Feature("bigram_overlap", "lexical", "share of the query's distinct bigrams found in the passage; word order"),
    Feature("phrase_present", "lexical", "1 if some query trigram occurs verbatim in the passage; exact phrase"),
    Feature("query_length", "lexical", "number of query tokens; lets trees condition on query specificity"),
    Feature("passage_length", "lexical", "number of passage tokens; length normalization"),
    # -- negation cues ----------------------------------------------------------------
    Feature("query_has_cue", "negation", "1 if the query contains a negation cue"),
    Feature("passage_has_cue", "negation", "1 if the passage contains a negation cue"),
    Feature("query_cue_count", "negation", "number of negation cues in the query"),
    Feature("passage_cue_count", "negation", "number of negation cues in the passage"),
    Feature("cue_count_diff", "negation", "passage cue count minus query cue count; polarity imbalance"),
    Feature("cue_match", "negation", "distinct query cues that also occur in the passage"),
    Feature("cue_extra", "negation", "distinct passage cues absent from the query; unasked negation"),
    Feature("cue_mismatch", "negation", "1 if exactly one of query and passage has a cue; polarity mismatch"),
)
FEATURE_NAMES: tuple[str, ...] = tuple(f.name for f in FEATURES)
assert len(FEATURES) == 38 and len(set(FEATURE_NAMES)) == 38

_BLOCK = 512  # queries per block of the query x passage matching products


@lru_cache(maxsize=1 << 16)
def tokens(text: str) -> tuple[str, ...]:
    """Lowercased alphanumeric tokens with the clitic n't split off (didn't -> did, n't); cached per text."""
    return tuple(_TOKEN.findall(text.lower().replace("\u2019", "'").replace("n't", " n't")))


#: Interned n-gram ids shared by all calls, so each text's id array can be cached; the ids are
#: only column indices of the matching matrices, so feature values never depend on them.
_VOCAB: dict[str, int] = {}
_CUES: tuple[str, ...] = tuple(sorted(NEGATION_CUES))


@lru_cache(maxsize=1 << 17)
def _gram_ids(text: str, n: int) -> np.ndarray:
    """Sorted distinct interned ids of the text's token n-grams; cached per (text, n)."""
    toks = tokens(text)
    grams = set(toks) if n == 1 else set(map("\x1f".join, zip(*(toks[i:] for i in range(n)))))
    known = _VOCAB.get
    ids = [known(g, -1) for g in grams]
    if -1 in ids:
        ids = [_VOCAB.setdefault(g, len(_VOCAB)) for g in grams]
    return np.unique(np.array(ids, dtype=np.int64))


@lru_cache(maxsize=1 << 16)
def _cue_counts(text: str) -> np.ndarray:
    """Occurrences of each lexicon cue (order of ``_CUES``) in the text; cached per text."""
    toks = tokens(text)
    return np.array([toks.count(c) for c in _CUES], dtype=np.float64)


def _incidence(query_texts: Sequence[str], passage_texts: Sequence[str], n: int) -> tuple[sparse.csr_matrix, sparse.csr_matrix]:
    """Binary query x n-gram and passage x n-gram matrices over the shared interned vocabulary."""
    q_ids = [_gram_ids(t, n) for t in query_texts]
    p_ids = [_gram_ids(t, n) for t in passage_texts]
    width = len(_VOCAB) + 1

    def build(ids: list[np.ndarray]) -> sparse.csr_matrix:
        indptr = np.concatenate([[0], np.cumsum([len(i) for i in ids])])
        cols = np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)
        return sparse.csr_matrix((np.ones(len(cols)), cols, indptr), shape=(len(ids), width))

    return build(q_ids), build(p_ids)


def _pair_products(qm: sparse.csr_matrix, pm: sparse.csr_matrix, qi: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """(qm @ pm.T)[qi, pi] for every pool row, computed in blocks of queries to bound memory."""
    out = np.zeros(len(qi), dtype=np.float64)
    order = np.argsort(qi, kind="stable")
    sorted_q = qi[order]
    pt = pm.T.tocsc()
    for start in range(0, qm.shape[0], _BLOCK):
        lo, hi = np.searchsorted(sorted_q, [start, start + _BLOCK])
        if lo == hi:
            continue
        rows = order[lo:hi]
        block = (qm[start:start + _BLOCK] @ pt).toarray()
        out[rows] = block[qi[rows] - start, pi[rows]]
    return out


def _safe_div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    return np.divide(num, den, out=np.zeros_like(num, dtype=np.float64), where=den > 0)


def _route_features(pool: pd.DataFrame, qcode: np.ndarray, cols: dict[str, np.ndarray]) -> None:
    filled_ranks = []
    rr = np.zeros(len(pool))
    for r in ROUTES:
        score = pool[f"{r}_score"].to_numpy(dtype=np.float64)
        rank = pool[f"{r}_rank"].to_numpy(dtype=np.float64)
        present = ~np.isnan(score)
        g = pd.Series(score).groupby(qcode, sort=False)
        lo, hi = g.transform("min").to_numpy(), g.transform("max").to_numpy()
        mean, std = g.transform("mean").to_numpy(), g.transform("std", ddof=0).to_numpy()
        cols[f"{r}_score"] = np.where(present, score, np.nan_to_num(lo, nan=0.0))
        filled_rank = np.where(present, rank, ROUTE_DEPTHS[r] + 1.0)
        cols[f"{r}_rank"] = filled_rank
        cols[f"{r}_present"] = present.astype(np.float64)
        span = hi - lo
        minmax = np.where(span > 0, _safe_div(score - lo, np.where(span > 0, span, 1.0)), 1.0)
        cols[f"{r}_minmax"] = np.where(present, minmax, 0.0)
        z = np.where(std > 1e-12, (score - mean) / np.where(std > 1e-12, std, 1.0), 0.0)
        zmin = pd.Series(np.where(present, z, np.nan)).groupby(qcode, sort=False).transform("min").to_numpy()
        cols[f"{r}_z"] = np.where(present, z, np.nan_to_num(zmin, nan=0.0))
        filled_ranks.append(filled_rank)
        rr += np.where(present, 1.0 / np.where(present, rank, 1.0), 0.0)
    ranks = np.column_stack(filled_ranks)
    cols["n_routes"] = cols["dense_present"] + cols["sparse_present"] + cols["bm25_present"]
    cols["min_rank"] = ranks.min(axis=1)
    cols["max_rank"] = ranks.max(axis=1)
    cols["rank_spread"] = cols["max_rank"] - cols["min_rank"]
    cols["rr_sum"] = rr


def _fusion_features(pool: pd.DataFrame, qcode: np.ndarray, pcode: np.ndarray, cols: dict[str, np.ndarray]) -> None:
    fused = np.asarray(fusion_scores(pool), dtype=np.float64)
    if fused.shape != (len(pool),):
        raise ValueError(f"pool_features: fusion_scores returned shape {fused.shape}, expected ({len(pool)},)")
    order = np.lexsort((pcode, -fused, qcode))  # pcode follows passage-id order: ties by id
    rank = np.empty(len(pool), dtype=np.float64)
    rank[order] = pd.Series(qcode[order]).groupby(qcode[order], sort=False).cumcount().to_numpy() + 1.0
    cols["fusion_score"] = fused
    cols["fusion_rank"] = rank
    cols["fusion_gap_top"] = pd.Series(fused).groupby(qcode, sort=False).transform("max").to_numpy() - fused


def _idf(corpus: Mapping[str, str], width: int) -> np.ndarray:
    """Smoothed, non-negative BM25-style IDF over the split's corpus, log(1 + (N - df + .5) / (df + .5)).

    Computed here from the corpus passed in, independently of the BM25 route, so a
    token absent from the corpus (df = 0) still gets a finite, largest weight.
    """
    ids = [_gram_ids(t, 1) for t in corpus.values()]
    df = np.bincount(np.concatenate(ids), minlength=width)[:width].astype(np.float64) if ids else np.zeros(width)
    n = float(len(corpus))
    return np.log1p((n - df + 0.5) / (df + 0.5))


def _text_features(pool: pd.DataFrame, qcode: np.ndarray, qids: np.ndarray, pcode: np.ndarray, pids: np.ndarray,
                   queries: Mapping[str, str], corpus: Mapping[str, str], cols: dict[str, np.ndarray]) -> None:
    missing_q = [q for q in qids if q not in queries]
    if missing_q:
        raise KeyError(f"pool_features: {len(missing_q)} pool qids have no query text, e.g. {missing_q[:3]}")
    missing_p = [p for p in pids if p not in corpus]
    if missing_p:
        raise KeyError(f"pool_features: {len(missing_p)} pool pids are not in the corpus, e.g. {missing_p[:3]}")
    q_texts = [queries[q] for q in qids]
    p_texts = [corpus[p] for p in pids]
    qi, pi = qcode, pcode

    uni_q, uni_p = _incidence(q_texts, p_texts, 1)
    shared = _pair_products(uni_q, uni_p, qi, pi)
    cols["query_overlap"] = _safe_div(shared, _row_sums(uni_q)[qi])
    cols["passage_overlap"] = _safe_div(shared, _row_sums(uni_p)[pi])
    idf = _idf(corpus, uni_q.shape[1])
    weighted_q = sparse.csr_matrix(uni_q.multiply(idf[np.newaxis, :]))
    cols["idf_overlap"] = _safe_div(_pair_products(weighted_q, uni_p, qi, pi), _row_sums(weighted_q)[qi])
    bi_q, bi_p = _incidence(q_texts, p_texts, 2)
    cols["bigram_overlap"] = _safe_div(_pair_products(bi_q, bi_p, qi, pi), _row_sums(bi_q)[qi])
    tri_q, tri_p = _incidence(q_texts, p_texts, 3)
    cols["phrase_present"] = (_pair_products(tri_q, tri_p, qi, pi) > 0).astype(np.float64)
    cols["query_length"] = np.array([len(tokens(t)) for t in q_texts], dtype=np.float64)[qi]
    cols["passage_length"] = np.array([len(tokens(t)) for t in p_texts], dtype=np.float64)[pi]

    q_cues = np.vstack([_cue_counts(t) for t in q_texts])
    p_cues = np.vstack([_cue_counts(t) for t in p_texts])
    q_count, p_count = q_cues.sum(axis=1)[qi], p_cues.sum(axis=1)[pi]
    q_kinds = sparse.csr_matrix((q_cues > 0).astype(np.float64))
    p_kinds = sparse.csr_matrix((p_cues > 0).astype(np.float64))
    shared_kinds = _pair_products(q_kinds, p_kinds, qi, pi)
    cols["query_has_cue"] = (q_count > 0).astype(np.float64)
    cols["passage_has_cue"] = (p_count > 0).astype(np.float64)
    cols["query_cue_count"] = q_count
    cols["passage_cue_count"] = p_count
    cols["cue_count_diff"] = p_count - q_count
    cols["cue_match"] = shared_kinds
    cols["cue_extra"] = _row_sums(p_kinds)[pi] - shared_kinds
    cols["cue_mismatch"] = ((q_count > 0) != (p_count > 0)).astype(np.float64)


def _row_sums(m: sparse.csr_matrix) -> np.ndarray:
    return np.asarray(m.sum(axis=1)).ravel()


def pool_features(pool: pd.DataFrame, queries: Mapping[str, str], corpus: Mapping[str, str]) -> np.ndarray:
    """Feature matrix, shape (len(pool), 38), float32, rows aligned with ``pool``, columns as ``FEATURES``.

    ``queries`` maps qid -> query text; ``corpus`` is the split's corpus (pid -> text),
    which also defines the IDF. A pool may hold any number of candidates per query
    (a single candidate gets min-max 1, z 0, fusion rank 1). Raises a ValueError naming
    the feature if a value is not finite after the documented fills (e.g. an infinite
    route score in the pool).
    """
    missing = [c for c in POOL_COLUMNS if c not in pool.columns]
    if missing:
        raise ValueError(f"pool_features: pool frame lacks columns {missing}")
    pool = pool.reset_index(drop=True)
    if not len(pool):
        return np.zeros((0, len(FEATURES)), dtype=np.float32)
    qcode, qids = pd.factorize(pool["qid"], sort=True)
    pcode, pids = pd.factorize(pool["pid"], sort=True)
    qids, pids = np.asarray(qids), np.asarray(pids)
    cols: dict[str, np.ndarray] = {}
    with np.errstate(invalid="ignore", divide="ignore"):  # non-finite inputs are reported below, by feature
        _route_features(pool, qcode, cols)
        _fusion_features(pool, qcode, pcode, cols)
        _text_features(pool, qcode, qids, pcode, pids, queries, corpus, cols)
    matrix = np.empty((len(pool), len(FEATURES)), dtype=np.float32, order="F")  # column-wise fill, no copy
    for j, name in enumerate(FEATURE_NAMES):
        matrix[:, j] = cols[name]
    bad = ~np.isfinite(matrix)
    if bad.any():
        col = int(np.argwhere(bad.any(axis=0))[0, 0])
        row = int(np.argwhere(bad[:, col])[0, 0])
        raise ValueError(f"pool_features: feature {FEATURE_NAMES[col]!r} is not finite for "
                         f"{int(bad[:, col].sum())} rows, e.g. qid={pool.at[row, 'qid']!r} pid={pool.at[row, 'pid']!r}")
    return matrix
