"""A pin cannot pass a regression larger than its margin (docs/statistics.md#tost): a change concentrated in a few
groups (which the guarded test cannot call a change: a rare whole-group loss is what the weak null allows) still
lies beyond the margin, and the TOST's shifted tests, read on their other sides, say so."""
from __future__ import annotations

import numpy as np
import pandas as pd

from reports.changes import decide_change, paired_change


def _frame(strict: np.ndarray, labels: np.ndarray) -> pd.DataFrame:
    """One ranker's per-direction outcomes (qid and the outcome fields), as the history reads them back."""
    return pd.DataFrame({"qid": [f"q{i}" for i in range(len(strict))], "strict": strict, "rank_pos": 1,
                         "rank_neg": 2, "tie": False, "fallback": False})


def test_a_regression_concentrated_in_12_groups_fails_a_one_point_pin() -> None:
    """420 groups of 1–12 directions; the 12 largest lose 2.7 points of strict preference between them."""
    rng = np.random.default_rng(13)
    sizes = rng.integers(1, 13, 420)
    labels = np.repeat(np.arange(420), sizes)
    then = rng.random(len(labels)) < 0.5
    hit = np.isin(labels, np.argsort(-sizes, kind="stable")[:12])
    then[hit] = True
    now = then.copy()
    total = round(0.027 * len(labels))  # 77 directions: 7 in five groups, 6 in seven
    for k, g in enumerate(np.argsort(-sizes, kind="stable")[:12]):
        now[np.flatnonzero(labels == g)[:total // 12 + (k < total % 12)]] = False
    verdict = paired_change("strict_pct", _frame(now, labels), _frame(then, labels), labels, margin=1.0)
    print(f"\npins: {verdict.message()}")
    assert verdict.differing_groups == 12 and verdict.delta < -2.6
    assert verdict.p_changed > 0.05  # the guarded paired test alone cannot call it a change
    assert verdict.decision == "changed" and verdict.p_beyond <= 0.05


def test_a_change_beyond_the_margin_is_changed_whatever_the_paired_test_says() -> None:
    assert decide_change(0.2, 0.9, p_beyond=0.01) == "changed"
    assert decide_change(0.2, 0.9, reachable=False, p_beyond=0.2, within=False) == "undetermined"
    assert decide_change(0.2, 0.9, reachable=False, p_beyond=0.2, within=True) == "margin unreachable"
