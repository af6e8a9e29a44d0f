"""Why judgments were unavailable: every window ranker's unavailable judgments counted by cause, per scope.

An unavailable judgment (a server error, a timeout, an unparseable or non-finite answer) sends its
query back to the reference order and is retried on the next run (``docs/protocol.md#fallback``);
the run says why, per ranker and scope, in ``report.md``, ``manifest.json`` (``unavailable``),
``unavailable.csv`` and at the end of the terminal output. Replies stored cut to the declared cap
(``max_reply_chars``) are counted beside them. A server-backed ranker also says which endpoints made its judgments
in this run and which were taken out for not answering (``docs/protocol.md#endpoints``): ``endpoints.csv``,
``report.md`` and ``manifest.json`` (``endpoints``).
"""
from __future__ import annotations

import pytest


@pytest.mark.part("unavailable")
def test_unavailable_judgments_by_cause(record, split, window_ranker) -> None:
    for row in (r for r in record[split].rows("unavailable").to_dict("records") if r["ranker"] == window_ranker):
        assert row["count"] > 0, row


@pytest.mark.part("endpoints")
def test_endpoints_that_judged_and_those_taken_out(record, split, window_ranker) -> None:
    """Which endpoints made the ranker's judgments in this run, and which were taken out for not answering."""
    for row in record[split].rows("endpoints").to_dict("records"):
        assert row["ranker"] != window_ranker or row["judgments"] >= 0, row
