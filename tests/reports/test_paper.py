"""The paper's published Test values: only what its text states, with its n named beside this run's."""
from __future__ import annotations

import pandas as pd
import pytest

from reports.paper import PAPER_N, paper_note, paper_table2


def test_published_rows_carry_the_numbers_the_text_states() -> None:
    rows = paper_table2("test").set_index("ranker")
    assert rows.at["ce", "mrr"] == pytest.approx(0.7404) and rows.at["ce", "strict_pct"] == pytest.approx(69.77)
    assert rows.at["grader", "mrr"] == pytest.approx(0.7509) and rows.at["fusion", "strict"] == 1431
    assert (rows.at["grader_e0", "strict_pct"], rows.at["grader_e0", "mrr"]) == (pytest.approx(78.47),
                                                                              pytest.approx(0.7148))
    assert pd.isna(rows.at["e0", "paired_pct"])  # not stated: NA, never 0
    assert paper_table2("confirmation") is None


def test_the_paper_s_n_is_named_as_its_own() -> None:
    assert PAPER_N == 2736
    note = paper_table2("test", run_n=2735)["note"].iat[0]
    assert "2,736" in note and "this run has n = 2,735" in note and "not directly comparable" in note
    assert "this run also has n = 2,736" in paper_note(2736)
    assert "cover their own n" in paper_note()
