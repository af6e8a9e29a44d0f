"""RerankersScorer on tiny local BERT checkpoints through the library's cross-encoder type (offline)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import AutoTokenizer, BertForSequenceClassification

from rankers.base import single_score_ranking
from rankers.scorers.base import TextScorer
from rankers.scorers.cache import ScoreCache
from rankers.scorers.pointwise import score_with_cache
from rankers.window import window_inputs, window_rerank

pytest.importorskip("rerankers", reason="optional extra not installed: pip install \"rerankers[transformers]\"")

from rankers.scorers.rerankers_scorer import RerankersScorer  # noqa: E402 (after the optional-extra skip)

INPUTS = [
    ("who was not born in paris?", "Marie was born in Lyon and never lived in Paris."),
    ("which film did not win an award", "The film won three awards at the festival, including best director."),
    ("who was not born in paris?", "Jean was born in Paris."),
    ("which film did not win an award", "a"),
    ("who was not born in paris?", "Marie was born in Lyon and never lived in Paris."),
]


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory, tiny_checkpoint):
    return tiny_checkpoint(tmp_path_factory.mktemp("rr") / "tiny-ce", 1, 0)


def reference_logits(path, inputs) -> np.ndarray:
    """One input at a time, no padding: what the library's batched scores must equal."""
    tok = AutoTokenizer.from_pretrained(path)
    model = BertForSequenceClassification.from_pretrained(path).eval()
    with torch.inference_mode():
        return np.array([model(**tok(q, p, return_tensors="pt")).logits[0, 0].item() for q, p in inputs])


def test_cross_encoder_type_scores_are_the_checkpoints_logits(ckpt):
    scorer = RerankersScorer(ckpt, model_type="cross-encoder", options={"device": "cpu", "dtype": "float32"})
    assert isinstance(scorer, TextScorer)
    batch = scorer.score(INPUTS)
    assert batch.errors == [None] * len(INPUTS)
    expected = reference_logits(ckpt, INPUTS)
    np.testing.assert_allclose(batch.scores, expected, rtol=0, atol=1e-5)
    assert np.ptp(expected) > 1e-4 and batch.scores[0] == batch.scores[4]


def test_model_key_names_library_weights_and_score_settings(tiny_checkpoint, ckpt, tmp_path):
    a = RerankersScorer(ckpt, model_type="cross-encoder", options={"batch_size": 4})
    assert a.model_key.startswith("rerankers-0.") and "TransformerRanker|tiny-ce@sha256:" in a.model_key
    assert RerankersScorer(ckpt, model_type="cross-encoder", options={"batch_size": 64}).model_key == a.model_key
    assert RerankersScorer(ckpt, model_type="cross-encoder", options={"dtype": "bfloat16"}).model_key != a.model_key
    other = tiny_checkpoint(tmp_path / "tiny-ce", 1, 7)  # same folder name, other weights
    assert RerankersScorer(other, model_type="cross-encoder").model_key != a.model_key
    assert RerankersScorer(ckpt, model_type="cross-encoder", revision="v2").model_key.endswith('@v2|{"batched":true,"lang":"en"}')


def test_two_logit_heads_are_refused_at_construction(tiny_checkpoint, tmp_path):
    # The library would score a one-passage query by its first logit; refuse rather than mis-score.
    with pytest.raises(ValueError, match="2-logit head; declare it as a cross_encoder"):
        RerankersScorer(tiny_checkpoint(tmp_path / "two", 2, 1), model_type="cross-encoder")


def query_by_query(monkeypatch, scorer: RerankersScorer) -> RerankersScorer:
    """The scorer read as the library's rankers other than its pointwise transformer one are: ``rank`` per query."""
    monkeypatch.setattr(type(scorer), "batched", property(lambda self: False))
    return scorer


def test_listwise_and_non_scalar_results_are_unavailable_with_reasons(ckpt, monkeypatch):
    from rerankers.documents import Document  # the library's own result types
    from rerankers.results import RankedResults, Result

    scorer = query_by_query(monkeypatch, RerankersScorer(ckpt, model_type="cross-encoder"))
    scorer.ranker.rank = lambda query, docs, doc_ids: RankedResults(
        [Result(Document(d, doc_id=i), rank=i + 1) for i, d in zip(doc_ids, docs)], query, has_scores=False)
    batch = scorer.score(INPUTS[:2])
    assert np.isnan(batch.scores).all() and all("listwise" in e for e in batch.errors)

    scorer.ranker.rank = lambda query, docs, doc_ids: RankedResults(
        [Result(Document(d, doc_id=i), score=[0.1, 0.2] if i == 0 else 0.5) for i, d in zip(doc_ids, docs)],
        query, has_scores=True)
    batch = scorer.score([("q", "x"), ("q", "y")])
    assert "not one number (shape (2,))" in batch.errors[0] and np.isnan(batch.scores[0])
    assert batch.errors[1] is None and batch.scores[1] == 0.5


def test_a_failing_query_loses_only_its_inputs(ckpt, monkeypatch):
    scorer = query_by_query(monkeypatch, RerankersScorer(ckpt, model_type="cross-encoder"))
    real_rank = scorer.ranker.rank

    def rank(query, docs, doc_ids):
        if "film" in query:
            raise RuntimeError("out of memory")
        return real_rank(query, docs, doc_ids=doc_ids)

    scorer.ranker.rank = rank
    batch = scorer.score(INPUTS)
    film = np.array(["film" in q for q, _ in INPUTS])
    assert np.isnan(batch.scores[film]).all() and all("out of memory" in batch.errors[i] for i in np.flatnonzero(film))
    np.testing.assert_allclose(batch.scores[~film], reference_logits(ckpt, [INPUTS[i] for i in np.flatnonzero(~film)]),
                               atol=1e-5)


def test_plugs_into_the_window_procedure(ckpt, tmp_path):
    pool = pd.DataFrame({"qid": ["q1"] * 3, "pid": ["a", "b", "c"]})
    fusion = single_score_ranking(pool, np.array([0.9, 0.5, 0.1]), "fusion")
    corpus = {"a": INPUTS[0][1], "b": INPUTS[2][1], "c": "unrelated"}
    scorer = RerankersScorer(ckpt, model_type="cross-encoder")
    with ScoreCache(tmp_path / "s.sqlite") as cache:
        scored = score_with_cache(scorer, window_inputs(fusion, {"q1": INPUTS[0][0]}, corpus, k=2), cache,
                                  progress=False)
    logits = reference_logits(ckpt, [INPUTS[0], INPUTS[2]])
    ranking = window_rerank(fusion, scored.scores, k=2, name="rerankers")
    expected_head = ["a", "b"] if logits[0] > logits[1] else ["b", "a"]
    assert ranking.frame["pid"].tolist() == [*expected_head, "c"] and not ranking.fallback


def test_the_transformer_ranker_is_scored_across_queries_as_rank_scores_it(ckpt, monkeypatch):
    """Batched across queries (the library's tokenize and model, at its batch size): the logits rank gives query by
    query; a failing batch loses only its own inputs."""
    scorer = RerankersScorer(ckpt, model_type="cross-encoder", options={"batch_size": 2})
    assert scorer.batched and scorer.chunk_size == 2048
    batched = scorer.score(INPUTS)
    np.testing.assert_allclose(batched.scores, reference_logits(ckpt, INPUTS), atol=1e-5)
    real = scorer.ranker.model.forward

    def forward(*args, **kwargs):
        if kwargs["input_ids"].shape[0] == 2 and forward.calls == 0:
            forward.calls += 1
            raise RuntimeError("out of memory")
        return real(*args, **kwargs)

    forward.calls = 0
    monkeypatch.setattr(scorer.ranker.model, "forward", forward)
    failed = scorer.score(INPUTS)
    lost = np.isnan(failed.scores)
    assert len({INPUTS[i] for i in np.flatnonzero(lost)}) == 2  # the failing batch's two distinct inputs
    assert all("out of memory" in failed.errors[i] for i in np.flatnonzero(lost))
    np.testing.assert_allclose(failed.scores[~lost], batched.scores[~lost])
