"""``kind = "rerank_api"``: an HTTP ``/rerank`` server scores the window (``rankers.scorers.rerank_api``).

vLLM, SGLang, llama.cpp's server (``--rerank``), Text Embeddings Inference (``api = "tei"``) or
Infinity. The server is asked before any work (``contact``: reachable, then one tiny rerank request): an
unreachable or misconfigured one is one clear error against the declaration at the start of the
session, not thousands of unavailable scores after the pools are built. ``url`` may be a list of servers of
the same model (``docs/protocol.md#endpoints``); each is asked. The URL is not part of the
scores' identity (the model and its revision are), so moving the server keeps the cache.
``max_reply_chars`` caps what is stored per input (``rankers.scorers.cache``).
"""
from __future__ import annotations

from rankers.kinds.base import Context, DeclarationError, RankerDecl, register
from rankers.kinds.pointwise import PointwiseKind, check_reply_cap
from rankers.scorers.base import TextScorer

_NUM = (int, float)


class RerankAPI(PointwiseKind):
    name = "rerank_api"
    options = {"url": (str, list), "model": (str,), "api": (str,), "concurrency": (int,), "timeout_s": _NUM,
               "batch_size": (int,), "revision": (str,), "max_reply_chars": (int,)}
    required = ("url", "model")
    doc = "an HTTP /rerank endpoint (vLLM, SGLang, llama.cpp server, TEI, Infinity)"

    def check(self, options, where: str) -> None:
        from rankers.scorers.http import base_urls  # http client only when declared

        try:
            base_urls(options["url"], "rerank server")
        except ValueError as exc:
            raise DeclarationError(f"{where}: {exc}") from None
        check_reply_cap(options, where)

    def contact(self, options, where: str) -> None:
        """The server answers HTTP, then one tiny rerank request: it serves the route and the model with a score."""
        from rankers.scorers.rerank_api import RerankAPIScorer, RerankServerError  # http client only when declared

        super().contact(options, where)
        scorer_options = self.scorer_options(options)
        try:
            RerankAPIScorer(**scorer_options).check()
        except (RerankServerError, ValueError) as exc:
            raise DeclarationError(f"{where}: {exc}") from None

    def build(self, decl: RankerDecl, ctx: Context) -> TextScorer:
        from rankers.scorers.rerank_api import RerankAPIScorer  # http client only when declared

        return RerankAPIScorer(**decl.scorer_options)  # checked against the server by ``contact``, before any work


register(RerankAPI())
