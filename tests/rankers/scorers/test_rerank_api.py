"""RerankAPIScorer against a loopback server that follows the rerank contract (grouping, index mapping,
flavours, faults, bounds), inside the window procedure, and against a real Infinity server."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

from fixtures.models import splade_tiny_path
from rankers.base import single_score_ranking
from rankers.scorers.base import TextScorer, by_query, score_replies
from rankers.scorers.cache import ScoreCache
from rankers.scorers.http import check_base_url
from rankers.scorers.pointwise import score_with_cache
from rankers.scorers.rerank_api import RerankAPIScorer, RerankServerError, parse_rerank_response
from rankers.window import window_inputs, window_rerank
from tests.support.loopback import free_port
from tests.support.rerank_server import (RerankServerUnavailable, contract_rerank_server, infinity_executable,
                                         infinity_server)


def length_score(query: str, document: str) -> float:
    """A score the test can recompute: document length, query length as a small offset."""
    return len(document) + len(query) / 100


INPUTS = [("q one", "aaa"), ("q two", "b"), ("q one", "cc"), ("q two", "dddd"), ("q one", "aaa"), ("q one", "e")]


def test_scores_map_back_by_index_one_query_per_request():
    with contract_rerank_server(length_score) as server:
        scorer = RerankAPIScorer(server.base_url, "my-reranker", revision="r1")
        assert isinstance(scorer, TextScorer)
        batch = scorer.score(INPUTS)
    # The server answers best first; the scores must still line up with the inputs.
    np.testing.assert_allclose(batch.scores, [length_score(q, p) for q, p in INPUTS])
    assert batch.errors == [None] * len(INPUTS)
    paths = [p for p, _ in server.requests]
    bodies = sorted((b for _, b in server.requests), key=lambda b: b["query"])
    assert paths == ["/v1/rerank", "/v1/rerank"]
    # One request per query, its distinct passages in first-seen order (the duplicate "aaa" is sent once).
    assert [(b["query"], b["documents"]) for b in bodies] == [("q one", ["aaa", "cc", "e"]), ("q two", ["b", "dddd"])]
    assert all(b["model"] == "my-reranker" and b["top_n"] == len(b["documents"]) and b["return_documents"] is False
               for b in bodies)
    # Per-input usage: the request's time and reported tokens shared among its documents.
    assert batch.usage[0]["request_documents"] == 3 and batch.usage[0]["input_tokens"] == 10.0
    assert all(u["seconds"] >= 0 for u in batch.usage)


def test_a_window_of_20_goes_in_one_request_and_batch_size_splits():
    window = [("q", f"passage {i:02d}") for i in range(20)]
    with contract_rerank_server(length_score) as server:
        RerankAPIScorer(server.base_url, "m").score(window)
        assert [len(b["documents"]) for _, b in server.requests] == [20]
        server.requests.clear()
        batch = RerankAPIScorer(server.base_url, "m", batch_size=8).score(window)
        assert sorted(len(b["documents"]) for _, b in server.requests) == [4, 8, 8]
    np.testing.assert_allclose(batch.scores, [length_score(q, p) for q, p in window])


def test_flavours_route_and_body():
    with contract_rerank_server(length_score) as server:
        plain = RerankAPIScorer(server.base_url + "/", "m", api="rerank").score(INPUTS[:2])
        tei = RerankAPIScorer(server.base_url, "m", api="tei", extra_body={"raw_scores": True}).score(INPUTS[:2])
    (path_plain, body_plain), *_ = server.requests
    path_tei, body_tei = server.requests[-1]
    assert path_plain == "/rerank" and "documents" in body_plain
    assert path_tei == "/rerank" and body_tei["texts"] in (["aaa"], ["b"]) and "documents" not in body_tei
    assert body_tei["raw_scores"] is True and body_tei["return_text"] is False
    for batch in (plain, tei):  # TEI answers a bare list with "score": same scores
        np.testing.assert_allclose(batch.scores, [length_score(q, p) for q, p in INPUTS[:2]])


def test_model_key_is_the_model_not_the_server():
    a = RerankAPIScorer("http://127.0.0.1:8000", "BAAI/bge-reranker-v2-m3", revision="abc123")
    b = RerankAPIScorer("https://gpu-box.example:9000/prefix", "BAAI/bge-reranker-v2-m3", revision="abc123")
    assert a.model_key == b.model_key
    assert "8000" not in a.model_key and "abc123" in a.model_key and "bge-reranker-v2-m3" in a.model_key
    assert RerankAPIScorer("http://h:1", "BAAI/bge-reranker-v2-m3", revision="def456").model_key != a.model_key
    assert RerankAPIScorer("http://h:1", "BAAI/bge-reranker-v2-m3", revision="abc123",
                           extra_body={"raw_scores": True}).model_key != a.model_key
    tei = RerankAPIScorer("http://h:1", "BAAI/bge-reranker-v2-m3", revision="abc123", api="tei")
    assert tei.model_key != a.model_key


@pytest.mark.parametrize("url, words", [
    ("ftp://127.0.0.1:80", "scheme"), ("127.0.0.1:8000", "scheme"), ("http://", "no host"),
    ("http://127.0.0.1:70000", "out of range"), ("http://127.0.0.1:0", "outside 1..65535"),
    ("http://127.0.0.1:port", "port"), ("http://127.0.0.1:80/?x=1", "query"),
])
def test_bad_urls_are_refused_at_construction_naming_the_url(url, words):
    with pytest.raises(ValueError, match=words) as info:
        RerankAPIScorer(url, "m")
    assert repr(url) in str(info.value)


def test_bad_options_are_refused():
    assert check_base_url("https://h.example:443/") == "https://h.example:443"
    with pytest.raises(ValueError, match="api 'cohere' unknown"):
        RerankAPIScorer("http://h:1", "m", api="cohere")
    with pytest.raises(ValueError, match="concurrency"):
        RerankAPIScorer("http://h:1", "m", concurrency=0)
    with pytest.raises(ValueError, match="timeout_s"):
        RerankAPIScorer("http://h:1", "m", timeout_s=0)
    with pytest.raises(ValueError, match="model name is empty"):
        RerankAPIScorer("http://h:1", "")


def test_dead_server_makes_inputs_unavailable_and_check_raises():
    scorer = RerankAPIScorer(f"http://127.0.0.1:{free_port()}", "m", timeout_s=5)
    batch = scorer.score(INPUTS)
    assert np.isnan(batch.scores).all()
    assert all("ConnectError" in e and "/v1/rerank" in e for e in batch.errors)
    with pytest.raises(RerankServerError, match=r"127\.0\.0\.1.*model 'm'"):
        scorer.check()


@pytest.mark.parametrize("fault, reason", [
    ("http500", "HTTP 500"), ("malformed", "malformed response"),
])
def test_a_failed_request_loses_only_its_query(fault, reason):
    with contract_rerank_server(length_score, fault=fault, fault_marker="two") as server:
        batch = RerankAPIScorer(server.base_url, "m").score(INPUTS)
    bad = np.array(["two" in q for q, _ in INPUTS])
    assert np.isnan(batch.scores[bad]).all() and all(reason in batch.errors[i] for i in np.flatnonzero(bad))
    np.testing.assert_allclose(batch.scores[~bad], [length_score(q, p) for q, p in np.array(INPUTS)[~bad]])


def test_missing_index_and_non_finite_score_are_per_document():
    with contract_rerank_server(length_score, fault="drop_index") as server:
        dropped = RerankAPIScorer(server.base_url, "m").score([("q", "a"), ("q", "bb"), ("q", "ccc")])
    # The server dropped index 2 (the last document sent): only that input is unavailable.
    assert dropped.errors[:2] == [None, None] and "no score for this document (index 2 of 3)" in dropped.errors[2]
    assert np.isnan(dropped.scores[2]) and np.isfinite(dropped.scores[:2]).all()
    with contract_rerank_server(length_score, fault="nan") as server:
        nan = RerankAPIScorer(server.base_url, "m").score([("q", "a"), ("q", "bb")])
    assert "non-finite score" in nan.errors[0] and nan.errors[1] is None and nan.scores[1] == length_score("q", "bb")


def test_untrustworthy_indices_void_the_whole_response():
    with pytest.raises(ValueError, match="out of range"):
        parse_rerank_response({"results": [{"index": 3, "relevance_score": 1.0}]}, 2)
    with pytest.raises(ValueError, match="returned twice"):
        parse_rerank_response([{"index": 0, "score": 1.0}, {"index": 0, "score": 2.0}], 2)
    with pytest.raises(ValueError, match="no integer 'index'"):
        parse_rerank_response({"results": [{"index": True, "relevance_score": 1.0}]}, 2)
    with pytest.raises(ValueError, match="neither"):
        parse_rerank_response({"data": []}, 2)
    scores, errors = parse_rerank_response({"results": [{"index": 1, "relevance_score": "high"}]}, 2)
    assert np.isnan(scores).all() and "no numeric" in errors[1].detail and "index 0 of 2" in errors[0].detail
    assert [e.cause for e in errors] == ["no score for a document", "no numeric score"]


def test_timeout_retries_and_bounded_concurrency():
    with contract_rerank_server(length_score, fault="hang") as server:
        hung = RerankAPIScorer(server.base_url, "m", timeout_s=0.2).score([("q", "a")])
    assert "timeout after 0.2s" in hung.errors[0]
    with contract_rerank_server(length_score, fault="http500") as server:
        RerankAPIScorer(server.base_url, "m").score([("q", "a")])
        assert len(server.requests) == 1  # retries are off by default
        RerankAPIScorer(server.base_url, "m", retries=2).score([("q", "a")])
        assert len(server.requests) == 4
    with contract_rerank_server(length_score, fault="pairs", slow_s=30.0) as server:  # answers two at a time
        batch = RerankAPIScorer(server.base_url, "m", concurrency=2).score([(f"q{i}", "a") for i in range(6)])
    assert server.peak == 2 and np.isfinite(batch.scores).all()
    with contract_rerank_server(length_score, fault="pairs", slow_s=0.5) as server:  # never two: each alone
        RerankAPIScorer(server.base_url, "m", concurrency=1).score([(f"q{i}", "a") for i in range(2)])
    assert server.peak == 1


def test_window_falls_back_for_the_queries_the_server_failed(tmp_path):
    pool = pd.DataFrame({"qid": ["good"] * 3 + ["bad"] * 3, "pid": ["p1", "p2", "p3"] * 2})
    fusion = single_score_ranking(pool, np.array([0.9, 0.5, 0.1, 0.9, 0.5, 0.1]), "fusion")
    queries = {"good": "good query", "bad": "bad query"}
    corpus = {"p1": "x", "p2": "yyy", "p3": "zz"}  # text score (length) reverses p1 and p2
    with contract_rerank_server(length_score, fault="http500", fault_marker="bad") as server, \
            ScoreCache(tmp_path / "scores.sqlite") as cache:
        scored = score_with_cache(RerankAPIScorer(server.base_url, "m"), window_inputs(fusion, queries, corpus, k=2),
                                  cache, progress=False)
    ranking = window_rerank(fusion, scored.scores, k=2, name="api")
    order = ranking.frame.groupby("qid")["pid"].apply(list).to_dict()
    assert order == {"good": ["p2", "p1", "p3"], "bad": ["p1", "p2", "p3"]}
    assert ranking.fallback == {"bad"} and scored.n_unavailable == 2


# ----------------------------------------------------------------------------- a real server: Infinity


@pytest.fixture(scope="module")
def tiny_reranker(tmp_path_factory):
    """A tiny BERT with a fresh one-logit head on the shipped SPLADE-tiny tokenizer (no training needed)."""
    path = tmp_path_factory.mktemp("tiny-reranker")
    torch.manual_seed(3)
    tok = AutoTokenizer.from_pretrained(splade_tiny_path())
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, num_labels=1)
    BertForSequenceClassification(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def test_real_infinity_server_returns_the_checkpoints_logits(tiny_reranker):
    try:
        infinity_executable()
    except RerankServerUnavailable as exc:
        pytest.skip(str(exc))
    inputs = [("who was not born in paris?", "Marie was born in Lyon and never lived in Paris."),
              ("who was not born in paris?", "Jean was born in Paris."),
              ("which film did not win an award", "The film won three awards at the festival."),
              ("which film did not win an award", "The film won no award at all, to the surprise of its director."),
              ("which film did not win an award", "a")]
    tok = AutoTokenizer.from_pretrained(tiny_reranker)
    model = BertForSequenceClassification.from_pretrained(tiny_reranker).eval()
    with torch.inference_mode():
        expected = np.array([model(**tok(q, p, return_tensors="pt")).logits[0, 0].item() for q, p in inputs])
    with infinity_server(tiny_reranker, model="tiny") as server:
        scorer = RerankAPIScorer(server.base_url, "tiny", revision="test", extra_body={"raw_scores": True})
        scorer.check()
        batch = scorer.score(inputs)
        squashed = RerankAPIScorer(server.base_url, "tiny", revision="test").score(inputs)
    assert batch.errors == [None] * len(inputs)
    np.testing.assert_allclose(batch.scores, expected, rtol=0, atol=1e-5)
    assert np.ptp(expected) > 1e-4  # the comparison could fail: the inputs' logits differ
    # Without raw_scores Infinity answers sigmoid(logit): a setting that changes scores, hence in model_key.
    np.testing.assert_allclose(squashed.scores, 1 / (1 + np.exp(-expected)), rtol=0, atol=1e-6)


def test_inputs_are_grouped_by_query_then_distinct_passage_with_the_positions_each_answers():
    inputs = [("q1", "a"), ("q2", "a"), ("q1", "b"), ("q1", "a")]
    assert by_query(inputs) == {"q1": {"a": [0, 3], "b": [2]}, "q2": {"a": [1]}}
    assert score_replies(np.array([0.5, np.nan])) == ["0.5", None]
