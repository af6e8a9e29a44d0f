"""CrossEncoderScorer on tiny random BERT checkpoints built offline from the SPLADE-tiny tokenizer."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer, BertForSequenceClassification

from fixtures.models import HubModelUnavailable
from rankers.scorers.base import TextScorer
from rankers.scorers.cache import ScoreCache
from rankers.scorers.cross_encoder import PREPROCESSING_VERSION, CrossEncoderScorer
from rankers.scorers.pointwise import score_with_cache

INPUTS = [
    ("who was not born in paris?", "Marie was born in Lyon and never lived in Paris."),
    ("who was born in paris?", "Jean was born in Paris. " * 12),
    ("a", "b"),
    ("which film did not win an award", "The film won three awards at the festival, including best director."),
    ("who was born in paris?", "Marie was born in Lyon and never lived in Paris."),
]


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory, tiny_checkpoint):
    return tiny_checkpoint(tmp_path_factory.mktemp("ce1"), 1, 0)


def reference_logits(path, inputs, max_length: int) -> np.ndarray:
    """One input at a time, no padding: what a batched scorer must reproduce."""
    tok = AutoTokenizer.from_pretrained(path)
    model = BertForSequenceClassification.from_pretrained(path).eval()
    out = []
    with torch.inference_mode():
        for q, p in inputs:
            enc = tok(q, p, truncation="longest_first", max_length=max_length, return_tensors="pt")
            out.append(model(**enc).logits[0].numpy())
    return np.array(out)


def test_raw_logits_survive_length_sorted_batching(ckpt):
    scorer = CrossEncoderScorer(ckpt, max_length=64, batch_size=2, device="cpu")
    assert isinstance(scorer, TextScorer)
    got = scorer.score(INPUTS)
    ref = reference_logits(ckpt, INPUTS, 64)[:, 0]
    np.testing.assert_allclose(got.scores, ref, rtol=1e-4, atol=1e-5)
    assert got.errors == [None] * 5 and len(got.usage) == 5
    # permuting inputs permutes scores: no input's score depends on its batch mates
    perm = [3, 0, 4, 2, 1]
    np.testing.assert_allclose(scorer.score([INPUTS[i] for i in perm]).scores, got.scores[perm], rtol=1e-4, atol=1e-5)
    assert scorer.score([]).scores.shape == (0,)


def test_truncation_is_counted_per_input(ckpt):
    scorer = CrossEncoderScorer(ckpt, max_length=16, batch_size=8, device="cpu")
    got = scorer.score(INPUTS)
    tok = AutoTokenizer.from_pretrained(ckpt)
    full = [len(tok(q, p)["input_ids"]) for q, p in INPUTS]
    assert [u["full_tokens"] for u in got.usage] == full
    assert [u["input_tokens"] for u in got.usage] == [min(n, 16) for n in full]
    assert [u["truncated"] for u in got.usage] == [float(n > 16) for n in full]
    assert scorer.n_truncated == sum(n > 16 for n in full) >= 2 and scorer.n_inputs == 5
    np.testing.assert_allclose(got.scores, reference_logits(ckpt, INPUTS, 16)[:, 0], rtol=1e-4, atol=1e-5)


def test_two_logit_models_return_log_odds(tiny_checkpoint, tmp_path):
    path = tiny_checkpoint(tmp_path / "ce2", 2, 1)
    got = CrossEncoderScorer(path, max_length=64, batch_size=3, device="cpu").score(INPUTS)
    ref = reference_logits(path, INPUTS, 64)
    np.testing.assert_allclose(got.scores, ref[:, 1] - ref[:, 0], rtol=1e-4, atol=1e-5)


def test_other_heads_are_refused(tiny_checkpoint, tmp_path):
    path = tiny_checkpoint(tmp_path / "ce3", 3, 1)
    with pytest.raises(ValueError, match="1- or 2-logit"):
        CrossEncoderScorer(path, device="cpu")


def test_model_key_names_everything_that_changes_a_score(tiny_checkpoint, ckpt, tmp_path):
    a = CrossEncoderScorer(ckpt, max_length=64, device="cpu")
    assert PREPROCESSING_VERSION in a.model_key and ckpt.name in a.model_key and "max64" in a.model_key
    assert "|float32|" in a.model_key  # dtype "auto" is float32 on CPU
    assert a.model_key == CrossEncoderScorer(ckpt, max_length=64, batch_size=1, device="cpu", chunk_size=3).model_key
    assert a.model_key != CrossEncoderScorer(ckpt, max_length=32, device="cpu").model_key
    other = tiny_checkpoint(tmp_path / ckpt.name, 1, 7)  # same folder name, other weights
    assert CrossEncoderScorer(other, max_length=64, device="cpu").model_key != a.model_key
    bf16 = CrossEncoderScorer(ckpt, max_length=64, device="cpu", dtype="bfloat16")
    assert bf16.model_key == a.model_key.replace("|float32|", "|bfloat16|")
    q = CrossEncoderScorer(ckpt, max_length=64, device="cpu", int8=True)
    assert q.model_key == a.model_key.replace("|float32|", f"|int8-dynamic-{torch.backends.quantized.engine}|")


def test_weights_edited_in_place_change_the_key(tiny_checkpoint, tmp_path):
    """The digest is taken from the bytes at load time, not remembered per folder for the process."""
    path = tiny_checkpoint(tmp_path / "ce", 1, 0)
    before = CrossEncoderScorer(path, max_length=64, device="cpu")
    tiny_checkpoint(path, 1, 5)
    after = CrossEncoderScorer(path, max_length=64, device="cpu")
    assert after.model_key != before.model_key
    assert not np.allclose(after.score(INPUTS).scores, before.score(INPUTS).scores)


def test_options_are_checked_at_construction(ckpt, monkeypatch):
    with pytest.raises(ValueError, match="dtype 'fp8' is not one of"):
        CrossEncoderScorer(ckpt, device="cpu", dtype="fp8")
    with pytest.raises(ValueError, match="int8 quantization runs on CPU only"):
        CrossEncoderScorer(ckpt, device="cuda", int8=True)
    with pytest.raises(ValueError, match="int8 quantizes a float32 model"):
        CrossEncoderScorer(ckpt, device="cpu", dtype="bfloat16", int8=True)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="torch sees no CUDA device"):
            CrossEncoderScorer(ckpt, device="cuda")
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        CrossEncoderScorer(ckpt, device="cpu", batch_size=0)
    with pytest.raises(ValueError, match="chunk_size must be >= 1"):
        CrossEncoderScorer(ckpt, device="cpu", chunk_size=0)
    # a hub name that is neither a folder nor cached fails before any loading, with both fixes named
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubModelUnavailable, match=r"cross-encoder model 'no-such-org/no-such-reranker'.*"
                                                  r"download it beforehand.*allow the hub"):
        CrossEncoderScorer("no-such-org/no-such-reranker", device="cpu")


def test_int8_quantization_keeps_the_order(ckpt):
    fp = CrossEncoderScorer(ckpt, max_length=64, device="cpu").score(INPUTS).scores
    q8 = CrossEncoderScorer(ckpt, max_length=64, device="cpu", int8=True).score(INPUTS).scores
    assert np.all(np.isfinite(q8)) and not np.array_equal(fp, q8)
    np.testing.assert_allclose(q8, fp, atol=0.05 * np.ptp(fp) + 1e-3)


def test_bfloat16_stays_close_to_float32(ckpt):
    fp = CrossEncoderScorer(ckpt, max_length=64, device="cpu").score(INPUTS).scores
    bf = CrossEncoderScorer(ckpt, max_length=64, device="cpu", dtype="bfloat16").score(INPUTS).scores
    assert np.all(np.isfinite(bf)) and not np.array_equal(fp, bf)
    np.testing.assert_allclose(bf, fp, atol=0.05 * np.ptp(fp) + 1e-2)


def test_sort_key_tracks_token_length(ckpt):
    """The driver's length sort uses the free character proxy; it must order inputs as tokens do here."""
    scorer = CrossEncoderScorer(ckpt, max_length=512, device="cpu")
    tokens = [u["full_tokens"] for u in scorer.score(INPUTS).usage]
    keys = [scorer.sort_key(q, p) for q, p in INPUTS]
    assert keys == [len(q) + len(p) for q, p in INPUTS]
    assert np.argsort(keys, kind="stable").tolist() == np.argsort(tokens, kind="stable").tolist()


def test_plugs_into_the_cache_in_chunks(ckpt, tmp_path):
    """The driver hands over ``chunk_size`` inputs per call; chunking and order never change a score."""
    whole = CrossEncoderScorer(ckpt, max_length=64, device="cpu").score(INPUTS).scores
    scorer = CrossEncoderScorer(ckpt, max_length=64, device="cpu", batch_size=2, chunk_size=2)
    calls: list[int] = []
    real = scorer.score
    scorer.score = lambda batch: calls.append(len(batch)) or real(batch)
    inputs = [("q", f"p{i}", q, p) for i, (q, p) in enumerate(INPUTS)]
    with ScoreCache(tmp_path / "s.sqlite") as cache:
        first = score_with_cache(scorer, inputs, cache, progress=False)
        again = score_with_cache(scorer, inputs, cache, progress=False)
    assert calls == [2, 2, 1]
    assert first.n_scored == 5 and again.n_scored == 0
    np.testing.assert_allclose(first.frame["score"], whole, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(again.frame["score"], first.frame["score"])
    assert again.frame["usage"][0]["truncated"] == 0.0 and again.frame["usage"][1]["truncated"] == 1.0


def test_hub_name_loads_from_the_local_hub_cache_keyed_by_its_commit(tmp_path, monkeypatch, tiny_checkpoint):
    """A hub id found in the local Hugging Face cache loads offline; its key names the snapshot's commit."""
    from huggingface_hub import constants

    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--suite-test--tiny-ce"
    tiny_checkpoint(repo / "snapshots" / commit, 1, 3)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    scorer = CrossEncoderScorer("suite-test/tiny-ce", max_length=64, device="cpu")
    assert scorer.model_key == f"cross-encoder|suite-test/tiny-ce|{commit}|float32|max64|{PREPROCESSING_VERSION}"
    np.testing.assert_allclose(scorer.score(INPUTS).scores,
                               reference_logits(repo / "snapshots" / commit, INPUTS, 64)[:, 0], rtol=1e-4, atol=1e-5)
    # another cached commit, asked for by revision: its own weights and its own key
    older = "f" * 40
    tiny_checkpoint(repo / "snapshots" / older, 1, 4)
    pinned = CrossEncoderScorer("suite-test/tiny-ce", max_length=64, device="cpu", revision=older)
    assert pinned.model_key == scorer.model_key.replace(commit, older)
    np.testing.assert_allclose(pinned.score(INPUTS).scores,
                               reference_logits(repo / "snapshots" / older, INPUTS, 64)[:, 0], rtol=1e-4, atol=1e-5)
