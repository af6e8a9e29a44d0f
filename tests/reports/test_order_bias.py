"""Order sensitivity and pairwise inconsistency from judged windows (hand-computed expectations)."""
from __future__ import annotations

import pandas as pd
import pytest

from reports.order_bias import order_bias_row

DIRECTIONS = pd.DataFrame({"qid": ["q1", "q2", "q3"], "preferred_pid": ["a", "a", "a"],
                           "counterpart_pid": ["b", "b", "x"]})


def _calls(keys, results=None, available=None):
    n = len(keys)
    return pd.DataFrame({"key": keys, "available": available or [True] * n, "result": results or [0] * n})


def test_listwise_order_check_share_of_designated_pairs_that_changed_and_kendall_tau():
    windows = pd.DataFrame([
        {"qid": "q1", "variant": "main", "fallback": False, "order": ("a", "b", "c"), "duplicates": 1, "missing": 0,
         "out_of_range": 0},
        {"qid": "q2", "variant": "main", "fallback": False, "order": ("a", "b", "c"), "duplicates": 0, "missing": 2,
         "out_of_range": 0},
        {"qid": "q3", "variant": "main", "fallback": True, "order": (), "duplicates": 0, "missing": 0,
         "out_of_range": 0},
        # q1 reversed: the model kept the input order (c b a): a and b swap. q2 reversed: a before b again.
        {"qid": "q1", "variant": "reversed", "fallback": False, "order": ("c", "b", "a"), "duplicates": 0,
         "missing": 0, "out_of_range": 0},
        {"qid": "q2", "variant": "reversed", "fallback": False, "order": ("a", "b", "c"), "duplicates": 0,
         "missing": 0, "out_of_range": 0},
        {"qid": "q3", "variant": "reversed", "fallback": False, "order": ("a", "c"), "duplicates": 0, "missing": 0,
         "out_of_range": 0},
    ])
    row = order_bias_row("lw", "window", windows, _calls(["k1", "k2", "k3", "k4", "k5", "k6"],
                                                         available=[True] * 5 + [False]), DIRECTIONS)
    assert (row["windows"], row["fallback_windows"], row["judgments"], row["unusable_judgments"]) == (3, 1, 6, 1)
    assert (row["windows_with_duplicates"], row["windows_with_missing"], row["windows_with_out_of_range"]) == (1, 1, 0)
    # q3's main window fell back: not checked. q1 changed, q2 did not.
    assert (row["order_checked"], row["order_checked_with_pair"], row["order_changed"]) == (2, 2, 1)
    assert row["order_changed_pct"] == 50.0
    assert row["order_kendall_tau"] == pytest.approx((-1.0 + 1.0) / 2)


def test_pairwise_inconsistency_and_first_position_choices():
    windows = pd.DataFrame([
        {"qid": "q1", "variant": "main", "fallback": False, "order": ("a", "b"), "pairs": 3.0, "inconsistent": 1.0},
        {"qid": "q2", "variant": "main", "fallback": False, "order": ("a", "b"), "pairs": 1.0, "inconsistent": 1.0},
    ])
    calls = _calls(["k1", "k2", "k3", "k1"], results=[0, 0, 1, 0])
    row = order_bias_row("pw", "pair_only", windows, calls, DIRECTIONS)
    assert (row["pairs"], row["inconsistent_pairs"], row["inconsistent_pct"]) == (4, 2, 50.0)
    assert row["first_shown_chosen_pct"] == pytest.approx(100 * 2 / 3)  # distinct judgments k1, k2 of k1..k3
    assert "order_checked" not in row
