"""``kind = "llm_grader"``: an LLM asked for an integer grade 0-4 (``docs/protocol.md#grader``).

``backend`` is ``llamacpp`` (a GGUF in-process on the CPU: the embedded default, needs
llama-cpp-python), ``vllm`` (in-process on a GPU) or ``openai`` (any OpenAI-compatible server at
``url``, which must answer ``GET {url}/models`` before any work: ``contact``; ``url`` may be a list of
servers of the same model, spread by least outstanding work with ``concurrency`` requests in flight on each,
``docs/protocol.md#endpoints``). ``model`` is an
embedded GGUF name (``llamacpp``), a hub name or local folder (``vllm``), or, for a server, the name
the server serves the model under (its alias: what ``GET /v1/models`` lists, e.g.
``--served-model-name`` or llama.cpp's ``--alias``). ``logprobs`` is the number of top alternatives
per generated token a server returns, from which the grade probabilities are read (0 to 20; ``true``
means 5, ``false`` means 0). ``max_reply_chars`` caps the reply stored per judgment
(``rankers.scorers.cache``). ``grade = "expected"`` reads E[g] = sum of g * p(g) from the
probabilities stored with the very judgments its argmax twin made (same options, hence the same
cache key): no model call of its own. The scale is bounded (0-4), so the tie-branch claims apply to
its argmax rankers. ``extra_body`` (a server only) adds fields to every request, e.g. llama.cpp's ``grammar``
or vLLM's ``guided_choice`` to constrain the answer to a digit; it enters the judgments' key.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rankers.kinds.base import Context, DeclarationError, RankerDecl, register
from rankers.kinds.llm import BACKEND_OPTIONS, LLMBackendKind, check_backend, check_server
from rankers.kinds.plan import JudgePlan
from rankers.kinds.pointwise import PointwiseKind, check_reply_cap
from rankers.scorers.base import TextScorer

_NUM = (int, float)
#: Options that configure the grader (prompt and data budgets), not the generation backend.
GRADER_KEYS = ("prompt", "passage_tokens", "query_tokens", "near_tie_margin")
#: How a judgment becomes the window rule's score: the argmax grade, or the expected grade E[g].
GRADES = ("argmax", "expected")
#: Top alternatives per token that ``logprobs = true`` asks a server for (the grade digit is nearly always among them).
DEFAULT_LOGPROBS = 5
#: The most alternatives OpenAI-compatible servers return per token.
MAX_LOGPROBS = 20


class LLMGrader(LLMBackendKind, PointwiseKind):
    name = "llm_grader"
    options = {**BACKEND_OPTIONS, "logprobs": (int, bool), "grade": (str,), "prompt": (str,), "passage_tokens": (int,),
               "query_tokens": (int,), "near_tie_margin": _NUM, "max_reply_chars": (int,)}
    max_score = 4.0
    doc = ("an LLM asked for an integer grade 0-4 (llamacpp, vllm or any OpenAI-compatible server: model = the "
           "server's model name/alias, logprobs = top alternatives per token, true = 5)")

    def check(self, options, where: str) -> None:
        if options.get("grade", "argmax") not in GRADES:
            raise DeclarationError(f"{where}: grade must be 'argmax' or 'expected', got {options['grade']!r}")
        check_backend(options, where)
        model = str(options.get("model", ""))
        if options["backend"] == "openai" and (model.startswith(("/", ".", "~")) or model.endswith(".gguf")):
            raise DeclarationError(f"{where}: for backend 'openai', model is the name the server serves the model "
                                   f"under (its alias, as GET <url>/models lists it), not a "
                                   f"file; got {model!r}")
        logprobs = options.get("logprobs", DEFAULT_LOGPROBS)
        if not isinstance(logprobs, bool) and not 0 <= logprobs <= MAX_LOGPROBS:
            raise DeclarationError(f"{where}: logprobs is the number of top alternatives per generated token the "
                                   f"server returns (an integer 0-{MAX_LOGPROBS}; true = {DEFAULT_LOGPROBS}, "
                                   f"false = 0), got {logprobs!r}")
        check_server(options, where, "grader", url_needs_server=True)
        check_reply_cap(options, where)

    def contact(self, options, where: str) -> None:
        """Every OpenAI-compatible server of ``url`` answers ``GET {url}/models`` (any HTTP status) before any work."""
        if not options.get("url"):
            return
        from rankers.scorers.http import base_urls, check_reachable  # http client only when a server is declared

        try:
            for url in base_urls(options["url"], "grader"):
                check_reachable(url, "/models", "grader")
        except ValueError as exc:
            raise DeclarationError(f"{where}: {exc}") from None

    def models(self, options) -> tuple[str, ...]:
        return ("model",) if options.get("backend") == "vllm" else ()

    def scorer_options(self, options) -> dict[str, Any]:
        """All but ``grade``, which only says how a judgment is read (argmax and expected twins share judgments),
        and the storage options.

        ``logprobs = true``/``false`` is the count it means (5/0), so both spellings share one cache key.
        """
        out = {k: v for k, v in super().scorer_options(options).items() if k != "grade"}
        if isinstance(out.get("logprobs"), bool):
            out["logprobs"] = DEFAULT_LOGPROBS if out["logprobs"] else 0
        return out

    def reading(self, options: Mapping[str, Any]) -> str:
        return str(options.get("grade", "argmax"))

    def judge_key(self, decl: RankerDecl, ctx: Context) -> str:
        return self.scorer(decl, ctx).model_key

    def plan(self, decl: RankerDecl, ctx: Context, inputs) -> JudgePlan:
        """One judgment per distinct input (docs/protocol.md#judging-cost)."""
        return self.plan_inputs(decl, ctx, inputs)

    def read(self, decl: RankerDecl, scored: Any) -> dict[tuple[str, str], float]:
        if decl.reading == "argmax":
            return scored.scores
        from rankers.scorers.grader import expected_grade  # grader stack only for a declared grader

        values = [expected_grade(u) for u in scored.frame["usage"]]
        return dict(zip(zip(scored.frame["qid"], scored.frame["pid"]), values))

    def build(self, decl: RankerDecl, ctx: Context) -> TextScorer:
        from rankers.scorers.grader import LLMGrader as Grader  # grader stack only when a grader is declared

        options = decl.scorer_options
        grading = {k: options.pop(k) for k in GRADER_KEYS if k in options}
        return Grader(self.make_backend(decl, ctx, options), **grading)


register(LLMGrader())
