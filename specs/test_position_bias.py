"""Repairs and position bias of every window ranker that judges several passages at once (listwise, pairwise).

A listwise judgment depends on the order of its candidates and a pairwise one on which passage is shown
first; ``order_bias.csv`` reports, per ranker and scope, the repairs its replies needed and how much the
input order moved its answers (``reports/order_bias.py``, ``docs/protocol.md#listwise``). The same numbers
go into the manifest. Pointwise rankers judge each passage alone: they have no candidate order to report.
"""
from __future__ import annotations

import pytest


@pytest.mark.part("order_bias")
def test_order_bias(record, split, window_ranker) -> None:
    for row in (r for r in record[split].rows("order_bias").to_dict("records") if r["ranker"] == window_ranker):
        assert 0 <= row["fallback_windows"] <= row["windows"]
