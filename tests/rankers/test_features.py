"""The 38 pool features (docs/protocol.md#lambdamart) against values computed by hand on tiny pools."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from rankers.features import FEATURE_NAMES, FEATURES, NEGATION_CUES, ROUTE_DEPTHS, pool_features, tokens

NAN = float("nan")


def pool(rows: list[tuple]) -> pd.DataFrame:
    """Pool frame from (qid, pid, dense_s, dense_r, sparse_s, sparse_r, bm25_s, bm25_r)."""
    return pd.DataFrame(rows, columns=["qid", "pid", "dense_score", "dense_rank", "sparse_score", "sparse_rank",
                                       "bm25_score", "bm25_rank"])


def as_frame(frame: pd.DataFrame, queries: dict[str, str], corpus: dict[str, str]) -> pd.DataFrame:
    x = pool_features(frame, queries, corpus)
    return pd.DataFrame(x, columns=FEATURE_NAMES, index=frame["pid"].to_numpy())


def test_table_declares_38_documented_features():
    assert len(FEATURES) == 38 and len(set(FEATURE_NAMES)) == 38
    assert {f.family for f in FEATURES} == {"route_score", "route_rank", "presence", "agreement", "normalized",
                                            "fusion", "lexical", "negation"}
    assert all(len(f.why) > 10 for f in FEATURES)


def test_tokens_split_clitic_negation_and_lowercase():
    assert tokens("Didn't the Cat's mat?") == ("did", "n't", "the", "cat", "s", "mat")
    assert "n't" in NEGATION_CUES and "not" in NEGATION_CUES


ROUTE_POOL = pool([
    ("q", "a", 0.9, 1, NAN, NAN, 3.0, 1),
    ("q", "b", 0.5, 2, 2.0, 1, NAN, NAN),
    ("q", "c", NAN, NAN, 1.0, 2, NAN, NAN),
])
ROUTE_TEXT = ({"q": "x"}, {"a": "x", "b": "y", "c": "z"})


def test_route_scores_ranks_presence_and_agreement_by_hand():
    f = as_frame(ROUTE_POOL, *ROUTE_TEXT)
    assert f["dense_score"].tolist() == pytest.approx([0.9, 0.5, 0.5])  # missing -> query's lowest returned
    assert f["sparse_score"].tolist() == pytest.approx([1.0, 2.0, 1.0])
    assert f["dense_rank"].tolist() == [1, 2, ROUTE_DEPTHS["dense"] + 1]
    assert f["sparse_rank"].tolist() == [51, 1, 2]
    assert f["bm25_rank"].tolist() == [1, 101, 101]
    assert f[["dense_present", "sparse_present", "bm25_present"]].to_numpy().tolist() == [[1, 0, 1], [1, 1, 0], [0, 1, 0]]
    assert f["n_routes"].tolist() == [2, 2, 1]
    assert f["min_rank"].tolist() == [1, 1, 2]
    assert f["max_rank"].tolist() == [51, 101, 151]
    assert f["rank_spread"].tolist() == [50, 100, 149]
    assert f["rr_sum"].tolist() == pytest.approx([2.0, 1.5, 0.5])


def test_within_query_normalization_by_hand():
    f = as_frame(ROUTE_POOL, *ROUTE_TEXT)
    assert f["dense_minmax"].tolist() == pytest.approx([1.0, 0.0, 0.0])
    assert f["bm25_minmax"].tolist() == pytest.approx([1.0, 0.0, 0.0])  # single returned score -> 1.0
    # dense: mean 0.7, population sd 0.2 -> z = +1, -1; missing takes the query's lowest z
    assert f["dense_z"].tolist() == pytest.approx([1.0, -1.0, -1.0], abs=1e-6)
    assert f["sparse_z"].tolist() == pytest.approx([-1.0, 1.0, -1.0], abs=1e-6)
    assert f["bm25_z"].tolist() == pytest.approx([0.0, 0.0, 0.0])


def test_fusion_score_rank_and_gap_by_hand():
    f = as_frame(ROUTE_POOL, *ROUTE_TEXT)
    # dense kept {0.9, 0.5} -> 1, 0; sparse log1p {2, 1} -> 1, 0; bm25 single -> 1; weights .70/.15/.15
    assert f["fusion_score"].tolist() == pytest.approx([0.85, 0.15, 0.0], abs=1e-6)
    assert f["fusion_rank"].tolist() == [1, 2, 3]
    assert f["fusion_gap_top"].tolist() == pytest.approx([0.0, 0.70, 0.85], abs=1e-6)


def test_fusion_rank_ties_follow_passage_id():
    frame = pool([("q", "b", 0.5, 2, NAN, NAN, NAN, NAN), ("q", "a", 0.5, 1, NAN, NAN, NAN, NAN)])
    f = as_frame(frame, {"q": "x"}, {"a": "x", "b": "x"})
    assert f.loc["a", "fusion_rank"] == 1 and f.loc["b", "fusion_rank"] == 2


LEX_QUERY = {"q": "Did the cat not sit on the mat?"}
LEX_CORPUS = {"a": "The cat did not sit on the mat.", "b": "A dog sat on a rug.", "z": "Unrelated words here."}
LEX_POOL = pool([("q", "a", 0.9, 1, NAN, NAN, NAN, NAN), ("q", "b", 0.8, 2, NAN, NAN, NAN, NAN)])


def test_lexical_overlap_by_hand():
    f = as_frame(LEX_POOL, LEX_QUERY, LEX_CORPUS)
    # query distinct tokens {did, the, cat, not, sit, on, mat}: 7
    assert f.loc["a", "query_overlap"] == pytest.approx(1.0)
    assert f.loc["b", "query_overlap"] == pytest.approx(1 / 7)  # only "on"
    assert f.loc["b", "passage_overlap"] == pytest.approx(1 / 5)  # {a, dog, sat, on, rug}
    # query bigrams: did_the the_cat cat_not not_sit sit_on on_the the_mat; passage a shares 5
    assert f.loc["a", "bigram_overlap"] == pytest.approx(5 / 7)
    assert f.loc["b", "bigram_overlap"] == 0.0
    assert f.loc["a", "phrase_present"] == 1.0 and f.loc["b", "phrase_present"] == 0.0  # "not sit on"
    assert f["query_length"].tolist() == [8, 8]
    assert f["passage_length"].tolist() == [8, 6]


def test_idf_overlap_uses_the_split_corpus():
    corpus = {"a": "cat", "b": "mat dog", "c": "dog mat"}  # N=3, df(cat)=1, df(mat)=2
    frame = pool([("q", "a", 0.9, 1, NAN, NAN, NAN, NAN), ("q", "b", 0.8, 2, NAN, NAN, NAN, NAN)])
    f = as_frame(frame, {"q": "cat mat"}, corpus)
    idf_cat, idf_mat = math.log(1 + 2.5 / 1.5), math.log(1 + 1.5 / 2.5)
    assert f.loc["a", "idf_overlap"] == pytest.approx(idf_cat / (idf_cat + idf_mat), rel=1e-6)
    assert f.loc["b", "idf_overlap"] == pytest.approx(idf_mat / (idf_cat + idf_mat), rel=1e-6)


def test_negation_cues_by_hand():
    f = as_frame(LEX_POOL, LEX_QUERY, LEX_CORPUS)
    assert f.loc["a", ["query_has_cue", "passage_has_cue", "query_cue_count", "passage_cue_count",
                       "cue_count_diff", "cue_match", "cue_extra", "cue_mismatch"]].tolist() == [1, 1, 1, 1, 0, 1, 0, 0]
    assert f.loc["b", ["passage_has_cue", "cue_count_diff", "cue_match", "cue_mismatch"]].tolist() == [0, -1, 0, 1]
    frame = pool([("q", "c", 0.9, 1, NAN, NAN, NAN, NAN)])
    g = as_frame(frame, {"q": "Who won?"}, {"c": "He didn't win, and never will; no one did."})
    assert g.loc["c", ["query_has_cue", "passage_cue_count", "cue_extra", "cue_mismatch"]].tolist() == [0, 3, 3, 1]


def test_single_candidate_pool_is_finite():
    frame = pool([("q", "a", 0.4, 1, NAN, NAN, NAN, NAN)])
    f = as_frame(frame, {"q": "anything"}, {"a": "some passage"})
    assert f.loc["a", "dense_minmax"] == 1.0 and f.loc["a", "dense_z"] == 0.0 and f.loc["a", "fusion_rank"] == 1
    assert np.isfinite(f.to_numpy()).all()


def test_rows_follow_pool_order_and_dtype():
    x = pool_features(ROUTE_POOL, *ROUTE_TEXT)
    shuffled = ROUTE_POOL.iloc[[2, 0, 1]]
    y = pool_features(shuffled, *ROUTE_TEXT)
    assert x.dtype == np.float32 and x.shape == (3, 38)
    np.testing.assert_array_equal(y, x[[2, 0, 1]])


def test_queries_are_independent():
    two = pd.concat([ROUTE_POOL, ROUTE_POOL.assign(qid="r", dense_score=ROUTE_POOL["dense_score"] * 10)])
    x = pool_features(two, {"q": "x", "r": "x"}, ROUTE_TEXT[1])
    np.testing.assert_array_equal(x[:3], pool_features(ROUTE_POOL, *ROUTE_TEXT))


def test_non_finite_value_names_the_feature():
    bad = ROUTE_POOL.copy()
    bad.loc[0, "dense_score"] = np.inf
    with pytest.raises(ValueError, match=r"feature 'dense_score' is not finite .* qid='q' pid='a'"):
        pool_features(bad, *ROUTE_TEXT)


def test_nan_rank_of_a_returned_passage_survives_fills_and_is_named():
    bad = ROUTE_POOL.copy()
    bad.loc[1, "dense_rank"] = NAN  # score present, rank missing: no documented fill applies
    with pytest.raises(ValueError, match=r"feature 'dense_rank' is not finite for 1 rows, e.g. qid='q' pid='b'"):
        pool_features(bad, *ROUTE_TEXT)


def test_missing_inputs_are_named():
    with pytest.raises(KeyError, match="no query text"):
        pool_features(ROUTE_POOL, {}, ROUTE_TEXT[1])
    with pytest.raises(KeyError, match="not in the corpus"):
        pool_features(ROUTE_POOL, ROUTE_TEXT[0], {"a": "x"})
    with pytest.raises(ValueError, match="lacks columns"):
        pool_features(ROUTE_POOL.drop(columns=["bm25_rank"]), *ROUTE_TEXT)
