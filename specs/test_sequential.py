"""Sequential samples: where each stopped, why, what it spent, and each claim's anytime-valid test there.

A ``sequential = true`` sample judges whole source groups batch by batch and stops once every
claim of its rankers is decided or its budget is spent (docs/statistics.md#sequential-samples).
Its part publishes the sample's row in ``cost.csv`` (groups, directions, judgments, tokens and
seconds spent, their share of the full split, the stopping reason) and one row per claim in
``sequential.csv``: the anytime-valid p-values and confidence sequence at the stop beside the
claim's bootstrap interval. The verdicts themselves are the claim specs' (H1, H2, H3x).
"""
from __future__ import annotations

import pytest


@pytest.mark.part("sequential")
def test_sequential_sample(record, split, sequential_sample) -> None:
    assert any(r["sample"] == sequential_sample for r in record[split].rows("sequential").to_dict("records"))
