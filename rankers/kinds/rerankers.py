"""``kind = "rerankers"``: any pointwise model of the ``rerankers`` library (``rankers.scorers.rerankers_scorer``).

An optional extra (``pip install -e ".[rerankers]"``); without it the ranker's rows are skipped with
that reason. ``options`` go to the library's ``Reranker``. Its listwise types (RankGPT, RankLLM) return ranks
without scores: they are declared as ``kind = "llm_listwise"`` with ``backend = "rerankers"``
(``docs/protocol.md#listwise``), and this kind refuses them with that pointer.
"""
from __future__ import annotations

from fixtures.models import require_model
from rankers.kinds.base import PATH_STARTS, Context, DeclarationError, RankerDecl, register
from rankers.kinds.pointwise import PointwiseKind
from rankers.kinds.requirements import Requirement, needs_module
from rankers.scorers.base import TextScorer

#: ``model_type`` values whose ``model`` is a Hugging Face name or a local folder.
HUB_TYPES = ("cross-encoder", "t5", "colbert", "llm-layerwise")
#: The library's listwise model types: ``kind = "llm_listwise"`` with ``backend = "rerankers"`` runs them.
LISTWISE_TYPES = ("rankgpt", "rankgpt3", "rankgpt4", "rankllm", "gpt")
RERANKERS = needs_module("rerankers", "the rerankers package", "pip install -e \".[rerankers]\"")


class Rerankers(PointwiseKind):
    name = "rerankers"
    options = {"model": (str,), "model_type": (str,), "batch_size": (int,), "options": (dict,)}
    required = ("model",)
    doc = "any model of the rerankers library"

    def check(self, options, where: str) -> None:
        if str(options.get("model_type", "")).lower() in LISTWISE_TYPES:
            raise DeclarationError(f"{where}: model_type {options['model_type']!r} is listwise (ranks, no scores); "
                                   f"declare kind = \"llm_listwise\", backend = \"rerankers\", model_type = "
                                   f"\"{options['model_type']}\" instead")

    def requirements(self, options) -> tuple[Requirement, ...]:
        return (RERANKERS,)

    def models(self, options) -> tuple[str, ...]:
        """A Hugging Face model (resolved before work) for the library's transformers-based types, and a path
        (``/``, ``~`` or ``.``) for any type: a local model, checked to exist and never looked up as a name
        (``fixtures.models.model_problem``). Other API and FlashRank names are the library's own business."""
        model_type, model = options.get("model_type"), str(options.get("model", ""))
        hub = model_type in HUB_TYPES or (model_type is None and "/" in model)
        return ("model",) if hub or model.startswith(PATH_STARTS) else ()

    def build(self, decl: RankerDecl, ctx: Context) -> TextScorer:
        from rankers.scorers.rerankers_scorer import RerankersScorer  # optional extra: rerankers

        options = dict(decl.options)
        model = require_model(options.pop("model"), f"{decl.name} (rerankers)")
        extra = {**options.pop("options", {}),
                 **({"batch_size": options.pop("batch_size")} if "batch_size" in options else {})}
        return RerankersScorer(model, options=extra, **options)


register(Rerankers())
