"""A researcher's own reranker, declared in a profile without touching the suite (README, "Evaluate your own").

A pointwise bi-encoder reranker: the score of (query, passage) is the cosine of their
sentence-transformers embeddings. It is a real, common baseline for window reranking (it
re-reads the passage text with a second model instead of reusing the pool's dense route
score) and it runs offline here with the embedded MiniLM weights. The suite calls
``make_scorer(**options)`` once and then ``score`` on batches of (query, passage) texts;
everything else — windows, caching, fallback, tables, claims — is the suite's.

Declare it in a profile::

    [rankers.minilm_window]
    kind = "python"
    factory = "examples.bi_encoder_reranker:make_scorer"
    options = { model = "builtin:all-MiniLM-L6-v2" }
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fixtures.models import minilm_path, model_fingerprint
from rankers.scorers.base import ScoreBatch


class BiEncoderScorer:
    """Cosine of query and passage embeddings; ``model_key`` names the weights' digest and the pooling."""

    def __init__(self, model: str) -> None:
        from sentence_transformers import SentenceTransformer  # heavy: torch, only when the ranker is declared

        self.path = str(minilm_path()) if model == "builtin:all-MiniLM-L6-v2" else model
        self.encoder = SentenceTransformer(self.path, device="cpu")
        fingerprint = model_fingerprint(self.path)
        self.revision = str(fingerprint.get("files_sha256") or fingerprint.get("revision") or "unpinned")[:16]

    @property
    def model_key(self) -> str:
        return f"bi-encoder-cosine|{self.path.rsplit('/', 1)[-1]}|{self.revision}|normalized-v1"

    def score(self, inputs: Sequence[tuple[str, str]]) -> ScoreBatch:
        queries = self.encoder.encode([q for q, _ in inputs], normalize_embeddings=True, convert_to_numpy=True)
        passages = self.encoder.encode([p for _, p in inputs], normalize_embeddings=True, convert_to_numpy=True)
        scores = (queries.astype(np.float64) * passages.astype(np.float64)).sum(axis=1)
        return ScoreBatch(scores, [None] * len(inputs), [{} for _ in inputs], [repr(float(s)) for s in scores])


def make_scorer(model: str = "builtin:all-MiniLM-L6-v2") -> BiEncoderScorer:
    """The factory a profile names: ``examples.bi_encoder_reranker:make_scorer``."""
    return BiEncoderScorer(model)
