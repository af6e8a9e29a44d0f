"""The run manifest (trace every number to what made it) and the split's shared files.

Code, data, models, profile (with the files it extends), seeds, samples and the pool
snapshot go into manifest.json; the annotated population and the pool snapshot are
handed to the publishing step, which writes qrels.txt, pool.parquet and directions.csv
(``harness.parts.manifest``).
"""
from __future__ import annotations

from harness.run import settle


def test_run_manifest(run, split) -> None:
    settle(run.compute("manifest", split))
    entries = run.record.entries[split]
    assert entries["scope"] == run.ev.settings.run_scope()
    assert {"pool", "corpus", "population"} <= set(run.record.artifacts[split])
