"""``kind = "rerank_api"``: an HTTP ``/rerank`` server scores the window (``rankers.scorers.rerank_api``).

vLLM, SGLang, llama.cpp's server (``--rerank``), Text Embeddings Inference (``api = "tei"``) or
Infinity. The server is asked once when the scorer is built: an unreachable or misconfigured one is
one clear error against the declaration, not thousands of unavailable scores. The URL is not part
of the scores' identity (the model and its revision are), so moving the server keeps the cache.
"""
from __future__ import annotations

from rankers.kinds.base import Context, DeclarationError, PointwiseKind, RankerDecl, register
from rankers.scorers.base import TextScorer

_NUM = (int, float)


class RerankAPI(PointwiseKind):
    name = "rerank_api"
    options = {"url": (str,), "model": (str,), "api": (str,), "concurrency": (int,), "timeout_s": _NUM,
               "batch_size": (int,), "revision": (str,)}
    required = ("url", "model")
    doc = "an HTTP /rerank endpoint (vLLM, SGLang, llama.cpp server, TEI, Infinity)"

    def check(self, options, where: str) -> None:
        from rankers.scorers.http import check_base_url  # http client only when declared

        try:
            check_base_url(options["url"], "rerank server")
        except ValueError as exc:
            raise DeclarationError(f"{where}: {exc}") from None

    def build(self, decl: RankerDecl, ctx: Context) -> TextScorer:
        from rankers.scorers.rerank_api import RerankAPIScorer  # http client only when declared

        scorer = RerankAPIScorer(**decl.options)
        scorer.check()  # an unreachable server is one clear error now, not thousands of unavailable scores later
        return scorer


register(RerankAPI())
