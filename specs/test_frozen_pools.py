"""The pools every ranker reads are the frozen ones shipped in data/pools (``docs/protocol.md#frozen-pools``).

A full run on the embedded models evaluates the frozen snapshots (copied into its cache) and retrieves nothing. A
subset run (CI) retrieves nothing either: its pool of a split is the frozen snapshot's rows of its queries, value for
value (tests/fixtures/test_pools.py proves that retrieving those queries gives the same bytes;
``python -m fixtures.freeze_pools --check`` proves on a machine that this code retrieves the frozen pools).
"""
from __future__ import annotations

import json

import pandas as pd
import pytest


def test_pool_is_the_frozen_one(evaluation, split) -> None:
    from fixtures.pools import FROZEN_DIR, load_snapshot

    manifest, path = evaluation.pool_snapshot(split)
    frozen_path = FROZEN_DIR / f"{split}.parquet"
    if not frozen_path.is_file():
        pytest.skip(f"no frozen pool of {split} in {FROZEN_DIR}")
    frozen_manifest = json.loads(frozen_path.with_suffix(".json").read_text(encoding="utf-8"))
    inputs = ("models", "depths", "corpus_hash")
    if any(manifest[k] != frozen_manifest[k] for k in inputs):
        pytest.skip(f"this profile's {split} pool has other models, depths or corpus than the frozen embedded one")
    if split not in evaluation.study.subset:  # the whole split: the frozen snapshot itself
        assert manifest["parquet_sha256"] == frozen_manifest["parquet_sha256"], (
            f"the {split} pool ({path}) is not the frozen one in {FROZEN_DIR}, which is stale for this code "
            "(refreeze: python -m fixtures.freeze_pools)")
        return
    assert manifest.get("taken_from", {}).get("parquet_sha256") == frozen_manifest["parquet_sha256"], (
        f"the {split} subset's pool ({path}) was not taken from the frozen one in {FROZEN_DIR}")
    pool, frozen = evaluation.pool(split), load_snapshot(frozen_path).frame
    rows = frozen[frozen["qid"].isin(set(pool["qid"]))].reset_index(drop=True)
    assert set(rows["qid"]) == set(pool["qid"]), f"{split}: subset queries missing from the frozen pool"
    pd.testing.assert_frame_equal(pool, rows, check_exact=True, obj=f"{split} subset pool vs frozen rows")
