"""How each declared kind is built: a full-pool ranking, or the text scorer of a window ranker.

One function per kind, looked up by the declaration's ``kind``; the session calls them and
never branches on ranker names. Heavy libraries load only when a kind is built (a warm
run that needs no scorer imports none of torch, transformers or llama.cpp).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from fixtures.models import require_model
from rankers.base import Ranking
from rankers.fusion import declared_rules, fusion_ranking
from rankers.registry import RankerDecl
from rankers.scorers.base import TextScorer

if TYPE_CHECKING:
    from harness.session import Evaluation

#: llm_grader options that configure the grader (prompt and data budgets), not the generation backend.
GRADER_KEYS = ("prompt", "passage_tokens", "query_tokens", "near_tie_margin")
PoolBuilder = Callable[["Evaluation", RankerDecl, str], Ranking]
ScorerBuilder = Callable[["Evaluation", RankerDecl], TextScorer]


class KindBuildError(RuntimeError):
    """A declared ranker could not be built; the message names the declaration."""


def _fusion(ev: Evaluation, decl: RankerDecl, split: str) -> Ranking:
    rules = declared_rules(decl.options.get("weights"), decl.options.get("thresholds"))
    return fusion_ranking(ev.pool(split), rules, name=decl.name)


def _lambdamart(ev: Evaluation, decl: RankerDecl, split: str) -> Ranking:
    return ev.learned(int(decl.options["background"])).rank(ev.pool(split), ev.queries(split),
                                                             ev.study.corpus_for(split), decl.name,
                                                             features=ev.pool_features(split))


def _python_loaded(ev: Evaluation, decl: RankerDecl, kind: str):
    """The declared factory's scorer, loaded once per (factory, options), checked to be of the declared kind."""
    from rankers.scorers.python_scorer import load_python_scorer  # user code: imported only when declared

    options = decl.options.get("options", {})
    loaded = ev.shared(("python", decl.options["factory"], repr(sorted(options.items()))),
                       lambda: load_python_scorer(decl.options["factory"], options, ranker=decl.name))
    if loaded.kind != kind:
        raise KindBuildError(f"{ev.where(decl)}: factory {decl.options['factory']!r} returned a {loaded.kind} scorer, "
                             f"but the declaration says window = {kind == 'window'}")
    return loaded


def _python_pool(ev: Evaluation, decl: RankerDecl, split: str) -> Ranking:
    from rankers.scorers.python_scorer import pool_ranking  # user code: imported only when declared

    return pool_ranking(_python_loaded(ev, decl, "pool"), ev.pool(split), ev.queries(split),
                        ev.study.corpus_for(split), decl.name)


def _trec_run(ev: Evaluation, decl: RankerDecl, split: str) -> Ranking:
    from rankers.trec_run import trec_run_ranking  # only when a run file is declared

    path = ev.resolve_path(decl.options["path"].replace("{split}", split))  # one run file per split, or one for all
    ranking, coverage = trec_run_ranking(path, ev.ranking(split, "fusion"), decl.name, allow_extra_qids=True)
    unknown = sorted(set(coverage.extra_qids) - ev.all_qids())
    if unknown:
        raise KindBuildError(f"{ev.where(decl)}: run file {path} ranks {len(unknown)} qid(s) that are no NevIR "
                             f"direction of any split, e.g. {unknown[:3]}")
    return ranking


POOL_KINDS: dict[str, PoolBuilder] = {"fusion": _fusion, "lambdamart": _lambdamart, "python": _python_pool,
                                      "trec_run": _trec_run}


def _cross_encoder(ev: Evaluation, decl: RankerDecl) -> TextScorer:
    options = dict(decl.options)
    model = options.pop("model")
    if model == "trained":
        fixed = sorted(set(options) & {"max_length", "dtype", "revision"})
        if fixed:
            raise KindBuildError(f"{ev.where(decl)}: the trained cross-encoder fixes {fixed} as trained; "
                                 "declare batch_size, device or int8 only")
        return ev.trained_cross_encoder().scorer(**options)
    from rankers.scorers.cross_encoder import CrossEncoderScorer  # heavy: torch and transformers

    return CrossEncoderScorer(require_model(model, decl.name), **options)


def _llm_grader(ev: Evaluation, decl: RankerDecl) -> TextScorer:
    from rankers.scorers.grader import LLMGrader  # grader stack only when a grader is declared
    from rankers.scorers.llm_backends import GenerationSettings, make_backend  # runtimes load lazily inside

    options = dict(decl.scorer_options)
    grading = {k: options.pop(k) for k in GRADER_KEYS if k in options}
    settings, options = GenerationSettings.split_options(options)
    backend, model = options.pop("backend"), str(options.pop("model"))
    url = options.pop("url", None)
    if backend == "llamacpp":
        from fixtures.gguf import gguf_model  # joins the GGUF parts on first use

        gguf = gguf_model(model.removeprefix("builtin:"), ev.settings.cache_dir)
        engine = make_backend("llamacpp", model=gguf.path, revision=gguf.sha256, settings=settings, **options)
    elif backend == "openai":
        if not url:
            raise KindBuildError(f"{ev.where(decl)}: backend 'openai' needs 'url' (an OpenAI-compatible /v1 base URL)")
        engine = make_backend("openai", model=model, base_url=url, settings=settings, **options)
    else:
        engine = make_backend(backend, model=require_model(model, decl.name), settings=settings, **options)
    return LLMGrader(engine, **grading)


def _rerank_api(ev: Evaluation, decl: RankerDecl) -> TextScorer:
    from rankers.scorers.rerank_api import RerankAPIScorer  # http client only when declared

    scorer = RerankAPIScorer(**decl.options)
    scorer.check()  # an unreachable server is one clear error now, not thousands of unavailable scores later
    return scorer


def _rerankers(ev: Evaluation, decl: RankerDecl) -> TextScorer:
    from rankers.scorers.rerankers_scorer import RerankersScorer  # optional extra: rerankers

    options = dict(decl.options)
    model = require_model(options.pop("model"), f"{decl.name} (rerankers)")
    extra = {**options.pop("options", {}), **({"batch_size": options.pop("batch_size")} if "batch_size" in options else {})}
    return RerankersScorer(model, options=extra, **options)


def _python_text(ev: Evaluation, decl: RankerDecl) -> TextScorer:
    return _python_loaded(ev, decl, "window").scorer


SCORER_KINDS: dict[str, ScorerBuilder] = {"cross_encoder": _cross_encoder, "llm_grader": _llm_grader,
                                          "rerank_api": _rerank_api, "rerankers": _rerankers, "python": _python_text}
