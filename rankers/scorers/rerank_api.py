"""A text scorer that asks an HTTP rerank server (``kind = "rerank_api"``).

The common rerank contract lets an existing serving engine do the cross-encoder inference
while the suite stays the client: ``POST {url}/v1/rerank`` (or ``/rerank``) with
``{"model", "query", "documents": [...], "top_n", "return_documents": false}`` answered by
``{"results": [{"index", "relevance_score"}, ...]}``. Servers and flavours (``api``):

- ``"v1"`` — ``{url}/v1/rerank``: vLLM, SGLang, llama.cpp's server (``--rerank``), Infinity
  started with ``--url-prefix /v1``;
- ``"rerank"`` — ``{url}/rerank``, same body: Infinity's default route (also served by vLLM
  and llama.cpp's server);
- ``"tei"`` — Text Embeddings Inference's native ``{url}/rerank`` with ``{"query", "texts",
  "return_text": false}`` answered by a list ``[{"index", "score"}, ...]``.

Responses are read by shape, not by flavour: ``{"results": [...]}`` or a bare list (TEI,
SGLang), each item an integer ``index`` with ``relevance_score`` or ``score``. Scores are
mapped back by index, never by position (servers sort results by score).

Each request carries one query and its documents (a window's 20 passages go in one request
at the default ``batch_size``). The server scores each (query, document) pair on its own,
as a cross-encoder does, so the scorer still sees nothing but (query, passage) text. Server
settings that change scores — e.g. ``{"raw_scores": true}`` (Infinity, TEI: logits instead
of sigmoids, which saturate into ties) or ``{"truncate": true}`` — go in ``extra_body`` and
so into ``model_key``; the URL does not, because the model and its revision, not the
machine serving them, are the scores' identity.

Queries and documents are sent with their chat-control syntax neutralized (``escape_control``, the
grader's rules, docs/protocol.md#grader): a rerank server tokenizes the pair with special tokens enabled,
so a passage holding ``</s>`` or ``<|im_end|>`` would otherwise end the model's segment there. The
rules' version is part of ``model_key``.

One failed request never raises: its inputs come back NaN with the reason (HTTP status,
timeout, refused connection, malformed JSON, missing index, non-finite score), so the
window falls back for those queries and counts them. ``check()`` is the one place that
raises: a declaration's server check against an unreachable or misconfigured server.
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
import numpy as np

from rankers.scorers.base import DeclaredKey, ScoreBatch, by_query, score_replies
from rankers.scorers.causes import Reason
from rankers.scorers.endpoints import Dispatcher, EndpointPool, endpoint_record
from rankers.scorers.http import base_urls, run_sync
from rankers.scorers.prompts.hostile import ESCAPE_VERSION, escape_control

#: Route and request body per flavour (see the module docstring).
API_ROUTES = {"v1": "/v1/rerank", "rerank": "/rerank", "tei": "/rerank"}


class RerankServerError(RuntimeError):
    """The server check ``check()`` could not get a valid answer from the server."""


def parse_rerank_response(data: Any, n_documents: int) -> tuple[list[float], list[Reason | None]]:
    """Score and error per document index of one response (NaN + reason where unusable).

    A response whose shape is wrong, or whose indices cannot be trusted (out of range,
    not integers, repeated), makes every document of the request unavailable: mapping
    any of its scores back could attach a score to the wrong passage.
    """
    items = data.get("results") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise ValueError(f"response is neither {{'results': [...]}} nor a list: {json.dumps(data)[:200]}")
    scores = [math.nan] * n_documents
    errors: list[Reason | None] = [
        Reason("no score for a document", f"server returned no score for this document (index {i} of {n_documents})")
        for i in range(n_documents)]
    seen: set[int] = set()
    for item in items:
        if not isinstance(item, dict):
            raise ValueError(f"result item is not an object: {item!r:.200}")
        index = item.get("index")
        if isinstance(index, bool) or not isinstance(index, int):
            raise ValueError(f"result item has no integer 'index': {item!r:.200}")
        if not 0 <= index < n_documents:
            raise ValueError(f"result index {index} out of range for {n_documents} documents")
        if index in seen:
            raise ValueError(f"result index {index} returned twice")
        seen.add(index)
        value = item.get("relevance_score", item.get("score"))
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            errors[index] = Reason("no numeric score",
                                   f"result {index} has no numeric 'relevance_score'/'score': {value!r:.100}")
        elif not math.isfinite(value):
            errors[index] = Reason("non-finite score", f"non-finite score {value!r}")
        else:
            scores[index], errors[index] = float(value), None
    return scores, errors


class RerankAPIScorer(DeclaredKey):
    """``TextScorer`` over an HTTP rerank endpoint, ``concurrency`` requests in flight at most.

    ``timeout_s`` bounds each attempt end to end, so a dead or stuck server costs at most
    ``(retries + 1) * timeout_s`` per request; retries are off by default (a retried
    timeout on an overloaded server only adds load).
    """

    def __init__(self, url: str | Sequence[str], model: str, *, api: str = "v1", revision: str = "unpinned",
                 concurrency: int = 4, timeout_s: float = 60.0, batch_size: int = 32, retries: int = 0,
                 extra_body: Mapping[str, Any] | None = None, api_key: str | None = None,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        urls = base_urls(url, "rerank server")
        self.url = urls[0]
        if api not in API_ROUTES:
            raise ValueError(f"rerank api {api!r} unknown; choose one of {sorted(API_ROUTES)}")
        if not model:
            raise ValueError(f"rerank server {self.url}: model name is empty")
        bounds = (("concurrency", concurrency, 1), ("batch_size", batch_size, 1), ("retries", retries, 0))
        for option, value, low in bounds:
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"rerank option {option} must be an integer >= {low}, got {value!r}")
        if not timeout_s > 0:
            raise ValueError(f"rerank option timeout_s must be > 0, got {timeout_s!r}")
        self.api = api
        self.model = model
        self.revision = revision
        self.concurrency = concurrency
        self.timeout_s = float(timeout_s)
        self.batch_size = batch_size
        self.retries = retries
        self.extra_body = dict(extra_body or {})
        self.api_key = api_key
        self.transport = transport
        #: The endpoints (``url`` one base URL or a list), ``concurrency`` requests in flight on each.
        self.pool = EndpointPool(urls, concurrency, "rerank server")

    def key_parts(self) -> dict[str, str]:
        return {"judge": "rerank_api", "api": self.api, "model": f"{self.model}@{self.revision}",
                "settings": json.dumps(self.extra_body, sort_keys=True, separators=(",", ":")),
                "escape": f"escape={ESCAPE_VERSION}"}

    def _body(self, query: str, documents: list[str]) -> dict[str, Any]:
        query, documents = escape_control(query), [escape_control(d) for d in documents]
        if self.api == "tei":
            return {"query": query, "texts": documents, "return_text": False, **self.extra_body}
        return {"model": self.model, "query": query, "documents": documents, "top_n": len(documents),
                "return_documents": False, **self.extra_body}

    def score(self, inputs: Sequence[tuple[str, str]]) -> ScoreBatch:
        n = len(inputs)
        scores = np.full(n, np.nan)
        errors: list[str | None] = [None] * n
        usage: list[dict[str, float]] = [{} for _ in range(n)]
        if n == 0:
            return ScoreBatch(scores, errors, usage, [])
        # One request per (query, chunk of its distinct passages); positions record where each goes back.
        requests: list[tuple[str, list[str], list[list[int]]]] = []
        for query, passages in by_query(inputs).items():
            docs = list(passages)
            for start in range(0, len(docs), self.batch_size):
                chunk = docs[start:start + self.batch_size]
                requests.append((query, chunk, [passages[d] for d in chunk]))
        results = run_sync(self._request_all([(q, d) for q, d, _ in requests]))
        for (_, docs, positions), (doc_scores, doc_errors, seconds, tokens, where) in zip(requests, results):
            for j, at in enumerate(positions):
                reason = doc_errors[j]
                for i in at:
                    scores[i], errors[i] = doc_scores[j], None if reason is None else reason.detail
                    usage[i] = {"seconds": seconds / len(docs), "request_documents": float(len(docs)), **where,
                                **({} if reason is None else {"cause": reason.cause})}
                    if tokens is not None:
                        usage[i]["input_tokens"] = tokens / len(docs)
        return ScoreBatch(scores, errors, usage, score_replies(scores))

    def check(self) -> None:
        """Preflight one tiny request; raise ``RerankServerError`` naming the URL and model when it fails."""
        for url in self.pool.urls:  # every endpoint of a list, each on its own
            [(_, doc_errors, _, _, _)] = run_sync(self._request_all([("ping", ["ping"])], EndpointPool([url], 1)))
            if doc_errors[0] is not None:
                raise RerankServerError(f"rerank server {url + API_ROUTES[self.api]} (model {self.model!r}, api "
                                        f"{self.api!r}) gave no usable score: {doc_errors[0]}")

    async def _request_all(self, batch: list[tuple[str, list[str]]], pool: EndpointPool | None = None
                           ) -> list[tuple[list[float], list[Reason | None], float, float | None, dict[str, Any]]]:
        pool = pool or self.pool
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        async with pool.dispatcher(headers, self.transport) as dispatcher:
            return await dispatcher.each(len(batch), lambda i: self._request(dispatcher, *batch[i]))

    async def _request(self, dispatcher: Dispatcher, query: str, documents: list[str]
                       ) -> tuple[list[float], list[Reason | None], float, float | None, dict[str, Any]]:
        """(scores, errors, seconds, input tokens or None, the endpoint that answered) for one request; never
        raises."""
        n = len(documents)
        read = lambda data: (*parse_rerank_response(data, n), _prompt_tokens(data))  # noqa: E731
        sent = await dispatcher.send(API_ROUTES[self.api], self._body(query, documents),
                                     timeout_s=self.timeout_s, retries=self.retries, read=read)
        where = endpoint_record(sent.endpoint, sent.resent_from)
        reply = sent.reply
        if reply.value is None:
            reason = Reason(reply.cause or "no reply", str(reply.error))
            return [math.nan] * n, [reason] * n, reply.seconds, None, where
        scores, errors, tokens = reply.value
        return scores, errors, reply.seconds, tokens, where


def _prompt_tokens(data: Any) -> float | None:
    """Input tokens a server reports in ``usage`` (``prompt_tokens`` or ``total_tokens``), when it does."""
    usage = data.get("usage") if isinstance(data, dict) else None
    tokens = usage.get("prompt_tokens", usage.get("total_tokens")) if isinstance(usage, dict) else None
    return float(tokens) if isinstance(tokens, (int, float)) and not isinstance(tokens, bool) else None
