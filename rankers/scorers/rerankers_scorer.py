"""A text scorer over any pointwise model of the ``rerankers`` library (``kind = "rerankers"``).

``rerankers`` (an optional extra: ``pip install "rerankers[transformers]"``) puts cross-encoders,
T5 rerankers, ColBERT, FlashRank and hosted APIs behind one ``Reranker(...).rank(query, docs)``
call. The suite calls it once per query with that query's distinct passages and reads each
passage's score back by document id, so the library's model plugs into the same window
procedure as the suite's own cross-encoder.

Only pointwise scores are usable: the window needs one score per (query, passage) that does
not depend on the other candidates. Listwise rankers of the library (RankGPT, RankLLM) return
ranks without scores (``has_scores`` false); their inputs come back unavailable with that
reason, and the window falls back and counts them. A ranker whose score is not one real
number is treated the same way; a multi-logit head through the cross-encoder type is refused
at construction, because the library would silently score a one-passage query by its first logit.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from fixtures.models import model_fingerprint
from rankers.scorers.base import DeclaredKey, ScoreBatch, by_query, score_replies
from rankers.scorers.causes import Reason, exception_cause
from rankers.scorers.http import error_text

#: Inputs per call from the cache driver: length-sorted chunks scored in batches across queries (``batched``, as the
#: cross_encoder kind's ``CHUNK_SIZE``), or the window kinds' chunk, query by query, for the library's other rankers.
BATCHED_CHUNK, UNBATCHED_CHUNK = 2048, 60
#: Options that change how fast scores come, never what they are; kept out of ``model_key``.
OPTIONS_NOT_IN_KEY = frozenset({"batch_size", "verbose", "device"})


class RerankersUnavailable(RuntimeError):
    """The ``rerankers`` package, or the dependencies of the requested model type, are not installed."""


class RerankersScorer(DeclaredKey):
    """``TextScorer`` over ``rerankers.Reranker(model, model_type=..., **options)``.

    ``revision`` defaults to the weights digest of a local folder, or the locally cached hub
    commit of a name ("unpinned" when neither is known: pin it for cache safety). The key
    also names the library version, because the library decides tokenization and truncation.
    """

    def __init__(self, model: str | Path, *, model_type: str | None = None, revision: str | None = None,
                 lang: str = "en", options: Mapping[str, Any] | None = None) -> None:
        try:
            from rerankers import Reranker  # heavy: optional extra; imports torch/transformers per model type
        except ImportError as exc:
            raise RerankersUnavailable(
                f"rerankers model {model!s}: the optional 'rerankers' package is not installed "
                f"(pip install \"rerankers[transformers]\"): {exc}") from exc
        ranker = Reranker(str(model), lang=lang, model_type=model_type, verbose=0, **dict(options or {}))
        if ranker is None:  # the library prints the missing extra and returns None instead of raising
            raise RerankersUnavailable(
                f"rerankers model {str(model)!r} (model_type={model_type!r}): the dependencies of this model type "
                f"are not installed; see the library's hint above (pip install \"rerankers[...]\")")
        local = Path(str(model)).expanduser().is_dir()
        if revision is None:
            fingerprint = model_fingerprint(str(model))
            revision = (f"sha256:{str(fingerprint['files_sha256'])[:16]}" if local
                        else str(fingerprint.get("revision") or "unpinned"))
        self._adopt(ranker, Path(str(model)).name if local else str(model), revision, lang, options or {})

    @classmethod
    def of(cls, ranker: Any, name: str, revision: str) -> RerankersScorer:
        """A ranker object the library already made (``evaluate(add={"mine": Reranker(...)})``), named and revised by
        its caller (``rankers.scorers.objects``: its model's name and a digest of its weights as loaded)."""
        scorer = cls.__new__(cls)
        settings = {"dtype": str(getattr(ranker, "dtype", ""))}
        scorer._adopt(ranker, name, revision, str(getattr(ranker, "lang", "en")), settings)
        return scorer

    def _adopt(self, ranker: Any, name: str, revision: str, lang: str, options: Mapping[str, Any]) -> None:
        """Keep a made ranker, refusing a multi-logit head read as one logit."""
        self.ranker, self.name, self.revision, self.lang, self.options = ranker, name, revision, lang, dict(options)
        self.ranker_class = type(ranker).__name__
        config = getattr(getattr(ranker, "model", None), "config", None)
        num_labels = getattr(config, "num_labels", 1)
        if num_labels != 1 and not getattr(ranker, "is_monobert", False):
            # The library squeezes the logits: an n-logit head yields n "scores" per batch of one passage,
            # and a query with a single passage would silently get its first logit as the score.
            raise ValueError(f"rerankers model {name!r}: {self.ranker_class} reads one logit, but the model has "
                             f"a {num_labels}-logit head; declare it as a cross_encoder ranker instead (it scores "
                             "two-logit heads by log-odds)")
        self.library_version = metadata.version("rerankers")

    def key_parts(self) -> dict[str, str]:
        settings = {k: v for k, v in self.options.items() if k not in OPTIONS_NOT_IN_KEY}
        settings["lang"] = self.lang
        if self.batched:  # batched across queries: the same logits but for the float order of a padded batch
            settings["batched"] = True
        return {"judge": f"rerankers-{self.library_version}", "class": self.ranker_class,
                "model": f"{self.name}@{self.revision}",
                "settings": json.dumps(settings, sort_keys=True, separators=(",", ":"), default=str)}

    @property
    def batched(self) -> bool:
        """Whether inputs are scored in batches across queries: the library's pointwise transformer ranker
        (``TransformerRanker``), whose ``rank`` is its ``tokenize`` and its model's logit per (query, passage), so a
        batch of several queries' passages gives the same scores as ``rank`` does query by query, at the batch size
        the ranker was made with, and the driver's length sort pads little (docs/kinds.md#objects-as-they-come)."""
        return (type(self.ranker).__name__ == "TransformerRanker" and callable(getattr(self.ranker, "tokenize", None))
                and getattr(self.ranker, "ranking_type", "pointwise") == "pointwise")

    @property
    def chunk_size(self) -> int:
        """Inputs per call from the cache driver: a long chunk, length-sorted, when batched; else the kind's own."""
        return BATCHED_CHUNK if self.batched else UNBATCHED_CHUNK

    def sort_key(self, query: str, passage: str) -> int:
        """Characters of an input: the driver sorts by them, so a batch holds inputs of about one length."""
        return len(query) + len(passage)

    def score(self, inputs: Sequence[tuple[str, str]]) -> ScoreBatch:
        n = len(inputs)
        scores = np.full(n, np.nan)
        errors: list[str | None] = [None] * n
        usage: list[dict[str, str]] = [{} for _ in range(n)]
        if self.batched:
            self._score_batched(inputs, scores, errors, usage)
            return ScoreBatch(scores, errors, usage, score_replies(scores))
        for query, passages in by_query(inputs).items():
            docs = list(passages)
            doc_scores, doc_errors = self._rank(query, docs)
            for j, doc in enumerate(docs):
                reason = doc_errors[j]
                for i in passages[doc]:
                    scores[i] = doc_scores[j]
                    if reason is not None:
                        errors[i], usage[i] = reason.detail, {"cause": reason.cause}
        return ScoreBatch(scores, errors, usage, score_replies(scores))

    def _score_batched(self, inputs: Sequence[tuple[str, str]], scores: np.ndarray, errors: list[str | None],
                       usage: list[dict[str, str]]) -> None:
        """Each distinct input once, in the driver's order, through the ranker's ``tokenize`` and model in batches of
        its ``batch_size``, each logit read as ``rank`` reads it (squeezed; a monoBERT head as its log-odds)."""
        import torch  # loaded with the ranker's model already

        where: dict[tuple[str, str], list[int]] = {}
        for i, pair in enumerate(inputs):
            where.setdefault((pair[0], pair[1]), []).append(i)
        distinct = list(where)
        size = int(getattr(self.ranker, "batch_size", 16) or 16)
        for start in range(0, len(distinct), size):
            batch = distinct[start:start + size]
            try:
                with torch.inference_mode():
                    logits = self.ranker.model(**self.ranker.tokenize(batch)).logits.float().cpu().numpy()
                values = logits[:, 1] - logits[:, 0] if self.ranker.is_monobert else logits.reshape(len(batch), -1)[:, 0]
                reasons = [None if np.isfinite(v) else Reason("non-finite score", f"non-finite score {float(v)!r}")
                           for v in values]
            except Exception as exc:  # one failing batch must not lose the chunk: its inputs become unavailable
                values = np.full(len(batch), np.nan)
                reasons = [Reason(exception_cause(exc), f"rerankers {self.ranker_class} failed: {error_text(exc)}")]
                reasons *= len(batch)
            for pair, value, reason in zip(batch, values, reasons):
                for i in where[pair]:
                    scores[i] = float(value) if reason is None else np.nan
                    if reason is not None:
                        errors[i], usage[i] = reason.detail, {"cause": reason.cause}

    def _rank(self, query: str, docs: list[str]) -> tuple[list[float], list[Reason | None]]:
        """One ``rank`` call for a query's passages; scores by doc id, NaN + reason where unusable."""
        n = len(docs)
        try:
            results = self.ranker.rank(query, docs, doc_ids=list(range(n)))
        except Exception as exc:  # one failing query must not lose the batch: its inputs become unavailable
            return [np.nan] * n, [Reason(exception_cause(exc),
                                         f"rerankers {self.ranker_class} failed: {error_text(exc)}")] * n
        if not getattr(results, "has_scores", False):
            return [np.nan] * n, [Reason("ranks without scores",
                                         f"rerankers {self.ranker_class} returns ranks without scores (listwise); "
                                         "window reranking needs one pointwise score per passage")] * n
        scores = [np.nan] * n
        errors: list[Reason | None] = [Reason("no score for a document",
                                              "rerankers returned no result for this passage")] * n
        for result in results.results:
            doc_id = result.document.doc_id
            if not isinstance(doc_id, int) or not 0 <= doc_id < n:
                return [np.nan] * n, [Reason("unknown document id",
                                             f"rerankers returned unknown document id {doc_id!r}")] * n
            value = np.asarray(result.score, dtype=float) if result.score is not None else np.array(np.nan)
            if value.size != 1:
                errors[doc_id] = Reason("score is not one number",
                                        f"score is not one number (shape {value.shape}): a multi-logit head?")
            elif not np.isfinite(value.item()):
                errors[doc_id] = Reason("non-finite score", f"non-finite score {value.item()!r}")
            else:
                scores[doc_id], errors[doc_id] = float(value.item()), None
        return scores, errors
