"""One benchmark per declared ranker: a full-pool ranker's ranking time, a window ranker's scorer throughput.

Parametrized from the profile like every spec (``pool_ranker``, ``scored_ranker`` in conftest.py), so a researcher's own ranker is timed beside the
paper's with no code change. Window rankers that read the same judgments (the grader on windows,
on designated pairs, with E0 as tie-breaker) share one scorer and one benchmark. Inputs are real
NevIR development texts: the fusion top-20 of its first queries; the score cache is bypassed. Under
``--benchmark-disable`` (a smoke run) a ranker whose model this cache lacks is skipped, naming it, not trained.
"""
from __future__ import annotations

import pytest

from rankers.window import window_inputs

N_INPUTS = 24


@pytest.fixture(scope="module")
def bench_split(evaluation) -> str:
    """Development, or the first evaluated split of a declared pair set that has none."""
    return "development" if "development" in evaluation.study.splits else evaluation.settings.splits[0]


@pytest.fixture(scope="module")
def development_inputs(evaluation, bench_split) -> list[tuple[str, str]]:
    fusion = evaluation.ranking(bench_split, "fusion")
    inputs = window_inputs(fusion, evaluation.queries(bench_split), evaluation.study.corpus_for(bench_split))
    return [(i.query, i.passage) for i in inputs[:N_INPUTS]]


@pytest.mark.benchmark(group="rankers-scoring")
def test_bench_window_scorer(benchmark, evaluation, scored_ranker, development_inputs) -> None:
    if benchmark.disabled:  # a smoke run (CI's): a model this cache lacks is not trained to score 24 inputs once
        from harness.models import study_models  # the study models' folders, nothing trained with train=False

        for model in study_models(evaluation, train=False, say=lambda _: None, rankers=[scored_ranker]):
            if model.path is None:
                pytest.skip(f"{scored_ranker}: {model.what} is not trained in this cache ({model.state}; "
                            "python -m harness.models trains it); a smoke run does not train it to time it")
    try:
        scorer = evaluation.scorer(scored_ranker)
    except NotImplementedError as exc:  # a kind that judges whole windows or pairs has no per-input scorer
        pytest.skip(str(exc))
    scorer.score(development_inputs[:2])  # build the model outside the timing
    batch = benchmark.pedantic(scorer.score, args=(development_inputs,), rounds=2, iterations=1)
    assert len(batch.scores) == len(development_inputs)
    if not benchmark.disabled:
        benchmark.extra_info.update(model_key=scorer.model_key, inputs=len(development_inputs),
                                    inputs_per_s=len(development_inputs) / benchmark.stats.stats.mean)


@pytest.mark.benchmark(group="rankers-full-pool")
def test_bench_full_pool_ranking(benchmark, evaluation, pool_ranker, bench_split) -> None:
    decl = evaluation.decl(pool_ranker)
    evaluation.ranking(bench_split, pool_ranker)  # train or load what the ranker needs, outside the timing
    ranking = benchmark.pedantic(evaluation.compute_ranking, args=(bench_split, decl), rounds=2, iterations=1)
    assert ranking.frame["qid"].nunique() == evaluation.pool(bench_split)["qid"].nunique() or decl.population != "all"
    if not benchmark.disabled:
        benchmark.extra_info.update(rows=len(ranking.frame), queries=int(ranking.frame["qid"].nunique()))
