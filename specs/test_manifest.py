"""The run manifest (trace every number to what made it) and the split's shared files.

Code, data, models, profile (with the files it extends), seeds, samples and the pool
snapshot go into manifest.json; the annotated population and the pool snapshot are
handed to the publishing step, which writes qrels.txt, pool.parquet and directions.csv
(``harness.parts.manifest``).
"""
from __future__ import annotations

import pytest


@pytest.mark.part("manifest")
def test_run_manifest(record, evaluation, split) -> None:
    entries = record[split].entries
    assert entries["scope"] == evaluation.settings.run_scope()
    assert {"pool", "corpus", "population"} <= {a.name for a in record[split].artifacts}
