"""The run manifest (trace every number to what made it) and the split's shared files.

Code, data, models, profile (with the files it extends), seeds, samples and the pool
snapshot go into manifest.json; the annotated population and the pool snapshot are
handed to the publishing step, which writes qrels.txt, pool.parquet and directions.csv.
"""
from __future__ import annotations

import pandas as pd

from fixtures.environment import environment_record
from fixtures.identity import git_commit
from fixtures.settings import PROJECT_ROOT
from reports.explore_data import top_of
from reports.outputs import stash_frame
from reports.record import Artifact


def test_run_manifest(evaluation, split, report) -> None:
    s = evaluation.settings
    study = evaluation.study
    profile = evaluation.profile
    pool_manifest, pool_path = evaluation.pool_snapshot(split)
    entries = {
        "code_commit": git_commit(PROJECT_ROOT, dirty=True) or "unknown (not a git checkout)",
        "settings": s.as_dict(),
        "scope": s.run_scope(),
        "profile": {"name": profile.name, "file": str(profile.path), "extends": [str(p) for p in profile.chain[:-1]],
                    "models": profile.models,
                    "rankers": {d.name: {"kind": d.kind, "population": d.population, "label": d.label,
                                         "compare_to": d.baseline, "reference": d.reference,
                                         "tie_breaker": d.tie_breaker, **d.options} for d in profile.ordered()},
                    "samples": {n: {"directions": evaluation.sample_size(n), "seed": evaluation.sample_seed(n),
                                    **({"sequential": {"batch": p.batch, "budget": p.budget.describe()}}
                                       if p.sequential else {})}
                                for n, p in profile.samples.items()}},
        "data": study.data_provenance(),
        "dataset": study.dataset(),
        "corpus_sha256": study.corpus_hashes(),
        "cut_seed": study.cut_seed,
        "subset": {k: len(v) for k, v in study.subset.items()} if study.subset else None,
        "pool": {**pool_manifest, "path": str(pool_path)},
        "environment": environment_record(),
    }
    for key, value in entries.items():
        report.entry(split, key, value)
    report.artifact(split, Artifact("pool", pool_path))
    corpus = study.corpus_for(split)  # passage texts for the explorer page (it embeds only those it shows)
    report.artifact(split, Artifact("corpus", stash_frame(
        s.cache_dir, f"corpus-{split}", pd.DataFrame({"pid": list(corpus), "text": list(corpus.values())}))))
    population = stash_frame(s.cache_dir, f"population-{split}", evaluation.population(split))
    report.artifact(split, Artifact("population", population))
    # The pool a number came from must name the corpus it retrieved from and the models that built it.
    assert pool_manifest["corpus_hash"] == study.corpus_hashes()[study.directions.loc[
        study.directions["split"] == split, "corpus"].iloc[0]]
    assert {"dense", "sparse", "bm25"} <= set(pool_manifest["depths"])
    # The explorer page shows the top of each pool in the order the window rankers rerank (last: a reference that
    # cannot be ranked fails here without taking the files above with it).
    for reference in sorted({d.reference for d in profile.ordered() if d.is_window and d.reference}):
        top = stash_frame(s.cache_dir, f"top-{reference}-{split}", top_of(evaluation.ranking(split, reference)))
        report.artifact(split, Artifact("top", top, ranker=reference))
