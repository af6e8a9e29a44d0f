"""Objects as they come (rankers.scorers.objects): a library's reranker object or a plain function is read as a text
scorer with no wrapper, its key derived from its weights as loaded or its code and what it reads, and an object
whose key cannot be derived is refused asking for model_key by name."""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from rankers.scorers.objects import Unkeyable, as_text_scorer
from rankers.scorers.python_scorer import ScorerDeclarationError, load_python_object

INPUTS = [("who wrote it", "she wrote it in 1990"), ("who wrote it", "nobody wrote it"),
          ("when did it open", "it opened in May"), ("who wrote it", "she wrote it in 1990")]


@pytest.fixture(scope="module")
def folder(tmp_path_factory, tiny_checkpoint) -> Path:
    return tiny_checkpoint(tmp_path_factory.mktemp("ce") / "tiny", 1, 7)


def test_a_sentence_transformers_cross_encoder_scores_as_predict_does_keyed_by_its_weights(folder: Path) -> None:
    import torch
    from sentence_transformers import CrossEncoder

    model = CrossEncoder(str(folder), device="cpu")
    scorer = as_text_scorer(model, "test")
    assert np.allclose(scorer.score(INPUTS), model.predict(INPUTS))
    assert "tiny|CrossEncoder@weights:" in scorer.model_key
    assert as_text_scorer(CrossEncoder(str(folder), device="cpu"), "test").model_key == scorer.model_key
    with torch.no_grad():  # a change made in memory after loading (a notebook's fine-tuning) is another model
        next(model.parameters())[0, 0] += 1.0
    assert as_text_scorer(model, "test").model_key != scorer.model_key
    model.max_length = 64
    assert "max_length" in as_text_scorer(model, "test").model_key


def test_a_rerankers_reranker_scores_as_its_rank_does_keyed_by_its_weights(folder: Path) -> None:
    import torch
    from rerankers import Reranker

    ranker = Reranker(str(folder), model_type="cross-encoder", verbose=0, device="cpu", dtype="float32")
    scorer = as_text_scorer(ranker, "test")
    results = ranker.rank("who wrote it", ["she wrote it in 1990", "nobody wrote it"]).results
    ranked = {r.document.text: r.score for r in results}
    batch = scorer.score(INPUTS)
    assert batch.scores[0] == pytest.approx(ranked["she wrote it in 1990"]) and batch.scores[0] == batch.scores[3]
    assert batch.scores[1] == pytest.approx(ranked["nobody wrote it"]) and not any(batch.errors)
    assert scorer.model_key.startswith("rerankers-")
    assert "|tiny@BertForSequenceClassification@weights:" in scorer.model_key
    with torch.no_grad():
        next(ranker.model.parameters())[0, 0] += 1.0
    assert as_text_scorer(ranker, "test").model_key != scorer.model_key


def test_a_function_of_query_and_passages_is_called_once_per_query_keyed_by_its_code_and_what_it_reads() -> None:
    weight = 2.0

    def overlap(query, passages):
        overlap.calls.append((query, list(passages)))  # the function itself is not a value it reads
        words = set(query.split())
        return [weight * len(words & set(p.split())) for p in passages]

    overlap.calls = []
    scorer = as_text_scorer(overlap, "test")
    assert list(scorer.score(INPUTS)) == [4.0, 4.0, 2.0, 4.0]
    assert overlap.calls == [("who wrote it", ["she wrote it in 1990", "nobody wrote it"]),
                     ("when did it open", ["it opened in May"])]
    key = scorer.model_key
    assert as_text_scorer(overlap, "test").model_key == key
    weight = 3.0  # the closure's value is part of the key: a changed setting re-scores
    assert as_text_scorer(overlap, "test").model_key != key


def test_what_cannot_be_keyed_is_refused_asking_for_model_key_by_name() -> None:
    lock = threading.Lock()

    def guarded(query, passages):
        with lock:
            return [1.0] * len(passages)

    with pytest.raises(Unkeyable, match=r"the value 'lock' it reads is a _thread.lock.*give it a model_key"):
        as_text_scorer(guarded, "python ranker 'g'")
    guarded.model_key = "guarded-v1"  # a key declared by name: the user's promise, taken as given
    assert as_text_scorer(guarded, "test").model_key.endswith("guarded-v1")


def test_an_object_with_score_inputs_and_no_model_key_is_keyed_by_its_class_and_state() -> None:
    class Scaled:
        def __init__(self, factor):
            self.factor = factor

        def score(self, inputs):
            return [self.factor * len(p) for _, p in inputs]

    assert as_text_scorer(Scaled(1.0), "t").model_key == as_text_scorer(Scaled(1.0), "t").model_key
    assert as_text_scorer(Scaled(1.0), "t").model_key != as_text_scorer(Scaled(2.0), "t").model_key


def test_an_object_with_compute_score_is_read_as_flagembedding_reranks() -> None:
    """FlagEmbedding's rerankers (FlagReranker, FlagLLMReranker) score by ``compute_score(pairs)`` (one float for one
    pair); FlagEmbedding 1.4.2 does not import with the locked transformers 5.24 (it imports
    transformers.modeling_attn_mask_utils), so this object has its method's shape."""
    class LengthReranker:
        max_length = 512

        def compute_score(self, sentence_pairs, normalize=False):
            return [float(len(p)) for _, p in sentence_pairs] if len(sentence_pairs) > 1 else float(
                len(sentence_pairs[0][1]))

    scorer = as_text_scorer(LengthReranker(), "t")
    assert list(scorer.score(INPUTS[:2])) == [20.0, 15.0] and list(scorer.score(INPUTS[:1])) == [20.0]


def test_anything_else_is_refused_naming_what_is_accepted() -> None:
    with pytest.raises(ScorerDeclarationError, match="none of what is accepted: an object with score"):
        load_python_object(object(), ranker="x")
    with pytest.raises(ScorerDeclarationError, match="is a class; hand over an instance"):
        load_python_object(dict, ranker="x")


@pytest.mark.parametrize("returned", [["59", "1", "2", "3"], np.array(["59", "1", "2", "3"]), ["a", "b", "c", "d"],
                                      [1.0, "2", 3.0, 4.0]])
def test_a_score_that_is_text_is_refused_numeric_or_not(returned) -> None:
    class Texts:
        model_key = "texts-v1"

        def score(self, inputs):
            return returned

    loaded = load_python_object(Texts(), ranker="texts")
    with pytest.raises(ScorerDeclarationError, match="text is refused, numeric or not"):
        loaded.scorer.score(INPUTS)


def test_a_library_object_the_suite_cannot_key_takes_the_model_key_it_is_given(folder: Path) -> None:
    """An object the message asks a model_key of, once given one, is keyed by it (no loop of refusals)."""
    from rerankers import Reranker

    ranker = Reranker(str(folder), model_type="cross-encoder", verbose=0, device="cpu", dtype="float32")
    ranker.model = object()  # as a client of a remote API holds no model the suite can read
    with pytest.raises(Unkeyable, match="no torch model the suite can read; give it a model_key"):
        as_text_scorer(ranker, "api")
    ranker.model_key = "hosted-reranker-v3"
    assert "declared@hosted-reranker-v3" in as_text_scorer(ranker, "api").model_key
