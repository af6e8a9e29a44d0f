"""Per-split artifacts other tools read (SPEC §5): qrels, TREC runs, pool parquet, directions.csv.

Rankers' per-direction outcomes are saved as parquet beside their runs; the report
plugin merges them into directions.csv at session end, so every worker can write
its own ranker's files without coordination.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from fixtures.artifacts import atomic_write
from rankers.base import Ranking
from reports.tables import directions_table
from reports.trec import write_qrels, write_run

POPULATION_FILE = "population.parquet"
OUTCOME_DIR = "outcomes"


def write_population(out_dir: Path, annotated: pd.DataFrame, pool: pd.DataFrame) -> None:
    """qrels.txt, pool.parquet (to recompute fusion independently) and the annotated population."""
    atomic_write(out_dir / "qrels.txt", lambda p: write_qrels(annotated, p))
    atomic_write(out_dir / "pool.parquet", lambda p: pool.to_parquet(p, index=False))
    atomic_write(out_dir / POPULATION_FILE, lambda p: annotated.to_parquet(p, index=False))


def write_ranking(out_dir: Path, ranking: Ranking, outcomes: pd.DataFrame) -> None:
    """runs/<ranker>.trec (full pool, final order) and the ranker's per-direction outcomes."""
    atomic_write(out_dir / "runs" / f"{ranking.name}.trec", lambda p: write_run(ranking, p, tag=ranking.name))
    atomic_write(out_dir / OUTCOME_DIR / f"{ranking.name}.parquet", lambda p: outcomes.to_parquet(p, index=False))


def assemble_directions_csv(out_dir: Path, rankers: list[str]) -> Path | None:
    """Merge the population and this run's rankers' saved outcomes into directions.csv.

    Only the named rankers are merged, so outcomes left by an earlier run with other
    settings never leak into this run's table.
    """
    population = out_dir / POPULATION_FILE
    if not population.is_file():
        return None
    annotated = pd.read_parquet(population)
    outcomes = {name: pd.read_parquet(out_dir / OUTCOME_DIR / f"{name}.parquet") for name in rankers
                if (out_dir / OUTCOME_DIR / f"{name}.parquet").is_file()}
    path = out_dir / "directions.csv"
    directions_table(annotated, outcomes).to_csv(path, index=False)
    return path
