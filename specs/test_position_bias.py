"""Repairs and position bias of every window ranker that judges several passages at once (listwise, pairwise).

A listwise judgment depends on the order of its candidates and a pairwise one on which passage is shown
first; ``order_bias.csv`` reports, per ranker and scope, the repairs its replies needed and how much the
input order moved its answers (``reports/order_bias.py``, ``docs/protocol.md#listwise``). The same numbers
go into the manifest. Pointwise rankers judge each passage alone: they have no candidate order to report.
"""
from __future__ import annotations

import pytest

from fixtures.populations import eligible_directions
from reports.order_bias import order_bias_row


def test_order_bias(evaluation, split, window_ranker, report) -> None:
    decl = evaluation.decl(window_ranker)
    scopes = ("pair",) if decl.designated_only else ("window", "pair")
    scored = {scope: evaluation.text_scores(split, window_ranker, scope) for scope in scopes}
    if all(s.windows is None for s in scored.values()):
        pytest.skip(f"{window_ranker} judges each passage on its own (kind {decl.kind}): no candidate order")
    directions = eligible_directions(evaluation.directions_for(split, window_ranker))
    for scope, s in scored.items():
        label = "pair_only" if scope == "pair" else scope
        row = order_bias_row(window_ranker, label, s.windows, s.calls, directions)
        report.add("order_bias", split, row, order=decl.order)
        report.entry(split, f"order_bias:{window_ranker}:{label}", row)
        main = s.windows[s.windows["variant"] == "main"]
        assert row["windows"] == len(set(s.frame["qid"])), "every judged query has exactly one window"
        assert row["fallback_windows"] == int(main["fallback"].sum()) == s.frame.loc[s.frame["score"].isna(),
                                                                                      "qid"].nunique()
