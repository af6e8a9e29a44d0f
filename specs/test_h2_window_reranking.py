"""H2: bounded top-20 text reranking improves both preference and position (docs/statistics.md#claims, paper §V-B).

Generated for every declared window ranker against its ``compare_to`` ranker on the same
directions: strict preference (Δ strict, in points) and, where the window was fully
scored, preferred-passage MRR. A claim holds when the one-sided group test on its side
rejects at α 0.05 after Holm within its family, and its decision interval (the test inverted at Holm's levels)
agrees with the verdict on every run; the bootstrap interval is reported beside it.
"""
from __future__ import annotations

import pytest

from reports.decision_intervals import row_agrees
from reports.hypotheses import STATUSES


@pytest.mark.part("h2")
def test_h2(record, split, h2_claim) -> None:
    """The claim's verdict from its family, enforced against the profile's reviewed expectation (the part's checks)."""
    row = record[split].row("claims", h2_claim)
    assert row["status"] in STATUSES and row_agrees(row), row["measured"]
