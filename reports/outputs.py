"""The files behind the published results, kept content-addressed in the cache until publication.

A ranker's TREC run, its per-direction outcomes and a split's annotated population are
computed by whichever pytest process evaluates them (an xdist worker, say). They go into
``<cache>/results/`` under a name derived from their content, so writing them twice is
harmless and a warm run finds them; the spec hands the path to the report, and only the
publishing step (``reports.writer.publish``) turns them into ``results/<split>/`` files. Each is
sealed with the user's key (``fixtures.artifacts``): one whose bytes changed in the cache, that is not sealed with
the key, or that is a link, is written again here, and publishing refuses to copy one that changed after that.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from fixtures.artifacts import ArtifactCorrupt, check_seal, discard, write_sealed
from fixtures.code import code_digest
from fixtures.identity import labeled_frame_digest, parts_digest
from rankers.base import RANKING_COLUMNS, Ranking
from rankers.trec import write_run


def _intact(path: Path) -> bool:
    try:
        check_seal(path)
    except (ArtifactCorrupt, OSError):
        return False
    return True


def stash_frame(cache_dir: Path, stem: str, frame: pd.DataFrame) -> Path:
    """``<cache>/results/<stem>-<digest>.parquet``, written (sealed) once per content."""
    path = Path(cache_dir) / "results" / f"{stem}-{labeled_frame_digest(frame)}.parquet"
    if not _intact(path):
        discard(path)
        write_sealed(path, lambda p: frame.to_parquet(p, index=False))
    return path


def stash_run(cache_dir: Path, ranking: Ranking) -> Path:
    """The ranking's TREC run (full pool, final order, its score keys, tagged with its name), written once per content:
    the name digests the rows the file writes (positions and keys) and the writer's code, so a file another version
    wrote is never taken for this one's."""
    digest = parts_digest([labeled_frame_digest(ranking.frame[list(RANKING_COLUMNS)]), code_digest(write_run.__module__)])
    path = Path(cache_dir) / "results" / f"run-{ranking.name}-{digest}.trec"
    if not _intact(path):
        discard(path)
        write_sealed(path, lambda p: write_run(ranking, p, tag=ranking.name))
    return path
