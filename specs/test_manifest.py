"""The run manifest (issue: trace every number to what made it): code, data, models, seeds, samples, profile."""
from __future__ import annotations

import subprocess

from fixtures.settings import PROJECT_ROOT


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=PROJECT_ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"


def test_run_manifest(evaluation, split, report) -> None:
    s = evaluation.settings
    study = evaluation.study
    entries = {
        "code_commit": _commit(),
        "settings": s.as_dict(),
        "profile": {"name": evaluation.profile.name, "file": evaluation.profile.path.name,
                    "models": evaluation.profile.models},
        "data": study.data_provenance(),
        "corpus_sha256": study.corpus_hashes(),
        "cut_seed": study.cut_seed,
        "subset": {k: len(v) for k, v in study.subset.items()} if study.subset else None,
        "pool": evaluation.pool_snapshot_manifest(split),
    }
    for key, value in entries.items():
        report.add("manifest", split, {"key": key, "value": value})
    # The pool a number came from must name the corpus it retrieved from and the models that built it.
    assert entries["pool"]["corpus_hash"] == study.corpus_hashes()[study.directions.loc[
        study.directions["split"] == split, "corpus"].iloc[0]]
    assert {"dense", "sparse", "bm25"} <= set(entries["pool"]["depths"])
