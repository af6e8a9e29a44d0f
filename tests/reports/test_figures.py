"""Figures 1 and 2: rankers named by their declared labels with n, no two labels on top of each other, and the
H3 interval with its note when the sample is too small to read it."""
from __future__ import annotations

import itertools
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from reports.figures import draw_figure1, draw_figure2, figure1_data, figure2_data, ranker_tick, write_figures


def table2() -> pd.DataFrame:
    """Three rankers: two at the same point (as fusion_pairs and fusion_windows were on the CI subset)."""
    rows = [("fusion", "fixed fusion (dense 0.70, sparse 0.15, BM25 0.15)", 48, 56.25, 0.5878, 50.0, 66.67, 0.47, 0.70),
            ("fusion_pairs", "fixed fusion on the grader's pair sample", 4, 50.0, 0.2423, 50.0, 50.0, 0.2423, 0.2423),
            ("fusion_windows", "", 4, 50.0, 0.2423, 50.0, 50.0, 0.2423, 0.2423)]
    frame = pd.DataFrame(rows, columns=["ranker", "label", "n", "strict_pct", "mrr", "strict_pct_lo", "strict_pct_hi",
                                        "mrr_lo", "mrr_hi"])
    return frame.assign(mean_rank_pos=[2.9, 8.75, 8.75], mean_rank_neg=[3.1, 8.75, 8.75])


def test_ranker_tick_wraps_the_label_and_names_ranker_and_n() -> None:
    assert ranker_tick("ce", "cross-encoder window", 2735) == "cross-encoder window\n(ce, n=2,735)"
    assert ranker_tick("fusion", "fusion", 48) == "fusion\n(n=48)"  # no label declared: the name once
    assert max(len(line) for line in ranker_tick("g", "x " * 40, 4).splitlines()) <= 38


def test_figure1_uses_labels_with_n_and_no_two_labels_overlap() -> None:
    data = figure1_data({"table2": table2()})
    assert data["label"].tolist() == ["fixed fusion (dense 0.70, sparse 0.15, BM25 0.15)",
                                      "fixed fusion on the grader's pair sample", "fusion_windows"]
    assert data["interval_note"].tolist() == ["", "(n=4: interval unreliable)", "(n=4: interval unreliable)"]
    fig = draw_figure1(data)
    try:
        fig.canvas.draw()
        _, bars = fig.axes
        ticks = [t.get_text() for t in bars.get_yticklabels()]
        assert ticks == ["fixed fusion (dense 0.70, sparse 0.15,\nBM25 0.15)\n(fusion, n=48)",
                         "fixed fusion on the grader's pair\nsample\n(fusion_pairs, n=4)", "fusion_windows\n(n=4)"]
        legend = [t.get_text() for t in fig.legends[0].get_texts()]
        assert legend[2] == "fusion_windows\n(n=4) interval unreliable; same point as fusion_pairs"
        assert not [t for t in fig.axes[0].texts], "no text is placed beside a point"
        renderer = fig.canvas.get_renderer()
        boxes = [t.get_window_extent(renderer) for t in [*bars.get_yticklabels(), *fig.legends[0].get_texts()]]
        overlapping = [(a, b) for a, b in itertools.combinations(range(len(boxes)), 2) if boxes[a].overlaps(boxes[b])]
        assert overlapping == []
    finally:
        plt.close(fig)


def designated_pair_rows(table: pd.DataFrame) -> pd.DataFrame:
    """Rows of a designated-pair ranker as table2 writes them: a strict share, no MRR and no rank."""
    return table.assign(ranker=["grader_pairs"], label=["LLM grader, designated pair"], mrr=[np.nan], mrr_lo=[np.nan],
                        mrr_hi=[np.nan], mean_rank_pos=[np.nan], mean_rank_neg=[np.nan])


def test_figure1_plots_only_rankers_with_a_full_pool_rank(tmp_path: Path) -> None:
    mixed = pd.concat([table2(), designated_pair_rows(table2().head(1))], ignore_index=True)
    assert figure1_data({"table2": mixed})["ranker"].tolist() == ["fusion", "fusion_pairs", "fusion_windows"]
    written = write_figures(tmp_path, {"table2": mixed})
    assert [p.name for p in written] == ["figure1.png"]
    assert pd.read_csv(tmp_path / "figure1.csv")["ranker"].tolist() == ["fusion", "fusion_pairs", "fusion_windows"]


def test_a_run_of_designated_pair_rankers_only_has_no_figure1(tmp_path: Path) -> None:
    """Nothing to place on a rank axis: no figure1.csv or .png, rather than a drawing error (log scale of nothing)."""
    only_pairs = designated_pair_rows(table2().head(1))
    assert figure1_data({"table2": only_pairs}).empty
    assert write_figures(tmp_path, {"table2": only_pairs}) == []
    assert not list(tmp_path.iterdir())


def test_figure2_shows_counts_n_and_the_h3_interval_with_its_note() -> None:
    tie_branch = pd.DataFrame({
        "scorer": ["grader"] * 3, "branch": ["equal_score", "different_score", "outside_window_or_fallback"],
        "directions": [4, 0, 0], "of_directions": [4, 4, 4], "directions_pct": [100.0, 0.0, 0.0],
        "non_successes": [2, 0, 0], "of_non_successes": [2, 2, 2], "non_successes_pct": [100.0, 0.0, 0.0],
        "double_max": [0.0, None, None], "double_max_pct": [0.0, None, None]})
    claims = pd.DataFrame([{"claim": "h3_grader_tie_branch_concentrates_failures", "family": "H3", "ranker": "grader",
                            "measure": "tie_branch_share", "effect": 0.0, "lo": 0.0, "hi": 0.0, "n": 4}])
    labels = pd.DataFrame({"ranker": ["grader"], "label": ["LLM grader, full top-20 window"]})
    data = figure2_data({"tie_branch": tie_branch, "claims": claims, "table2": labels})
    assert data["h3_interval_note"].iloc[0] == "(n=4: interval unreliable)"
    fig = draw_figure2(data)
    try:
        title = fig.axes[0].get_title()
        assert title.splitlines() == ["LLM grader, full top-20 window", "grader: n=4 directions, 2 non-successes",
                                      "both max grade in 0.0% of ties",
                                      "H3 equal-grade excess +0.00 pts [+0.00, +0.00] (n=4: interval unreliable)"]
        counts = [t.get_text() for t in fig.axes[0].texts]
        assert counts == ["4/4", "0/4", "0/4", "2/2", "0/2", "0/2"]
    finally:
        plt.close(fig)


@pytest.mark.parametrize("missing", ["claims", "table2"])
def test_figure2_without_claims_or_labels_names_the_scorer(missing: str) -> None:
    tie_branch = pd.DataFrame({"scorer": ["g"], "branch": ["equal_score"], "directions": [3], "of_directions": [30],
                               "directions_pct": [10.0], "non_successes": [1], "of_non_successes": [10],
                               "non_successes_pct": [10.0], "double_max": [1.0], "double_max_pct": [33.3]})
    tables = {"tie_branch": tie_branch, "claims": pd.DataFrame({"claim": []}),
              "table2": pd.DataFrame({"ranker": ["g"], "label": ["grader G"]})}
    del tables[missing]
    data = figure2_data(tables)
    assert data["label"].tolist() == (["g"] if missing == "table2" else ["grader G"])
    assert data["h3_effect"].isna().all() and data["h3_interval_note"].tolist() == [""]


def test_an_estimate_outside_its_interval_draws_a_zero_arm_instead_of_failing_the_publication() -> None:
    """One source group: the interval is the estimate itself, and its rounding put the estimate a hair outside it
    (−16.67 [−16.67, −16.67] failed publishing with matplotlib's "'yerr' must not contain negative values")."""
    table = table2().head(1).assign(strict_pct=-16.666666666666668, strict_pct_lo=-16.666666666666664,
                                    strict_pct_hi=-16.666666666666664, mrr=0.25, mrr_lo=0.2500000000000001,
                                    mrr_hi=0.2500000000000001, n=36)
    data = figure1_data({"table2": table})
    assert data["interval_note"].tolist() == ["(n=36: interval unreliable)"]  # the sentence beside it
    fig = draw_figure1(data)
    try:
        fig.canvas.draw()
    finally:
        plt.close(fig)
