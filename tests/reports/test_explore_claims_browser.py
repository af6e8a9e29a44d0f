"""The explorer's Claims table at a laptop's width, in headless Chromium: status first, the claim's name held at
the left while the table scrolls, the decisive numbers on screen, whole counts as integers, reasons wrapped.

The page is the hand-made split of ``tests/reports/test_explore.py`` with claims shaped like a real run's
``claims.csv`` (every statistic column, a reason of several hundred characters); the driver is
``tests/reports/test_explore_browser.py``'s.
"""
from __future__ import annotations


import pandas as pd
import pytest

from reports.explore import load_inputs, render
from reports.explore_data import page_data
from tests.reports.test_explore import artifacts as _artifacts_fixture
from tests.reports.test_explore_browser import _require_browser, browser  # noqa: F401 (the driver fixture)

WIDTH = 1400
REASON = ("inconclusive: one-sided p 0.82 on the claimed side (Holm 1), 1 on the other (Holm 1) in family "
          "H2:grader (4 hypotheses, α 0.05); only 33 groups differ (< 40), so the bound-aware test decides too; "
          "MDE 12.06 pts at n=2740, 51 groups, 33 differing, 112 discordant; about 1,765 directions would give "
          "80% power at the observed +4.04 pts")
CLAIMS = pd.DataFrame([
    {"claim": "h2_grader_strict_gt_fusion", "family": "H2:grader", "status": "inconclusive", "expected": "holds",
     "measured": "inconclusive: +4.04 pts", "ranker": "grader", "versus": "fusion", "measure": "strict_pct",
     "claimed": "> 0", "reason": REASON, "effect": 4.04, "decision_lo": -6.0, "decision_hi": 14.0,
     "decision_level": 0.0125, "lo": -3.57, "hi": 11.5, "unit": "pts", "p_value": 0.82,
     "p_adjusted": 1.0, "p_opposite": 1.0, "p_opposite_adjusted": 1.0, "mde": 12.0634, "mde_level": 0.0125,
     "directions_needed": 1765.0, "n": 2740.0, "n_groups": 51.0, "differing_groups": 33.0, "discordant": 112.0,
     "family_hypotheses": 4.0},
    {"claim": "gate:fallback_pct_max:grader", "family": "gate", "status": "holds", "expected": "holds",
     "measured": "0 (limit 0)"},
])
#: sequential.csv's row of the first claim: its sample spent the budget after the claim was decided at look 3.
SEQUENTIAL = pd.DataFrame([{"claim": "h2_grader_strict_gt_fusion", "sample": "grader_pairs", "look": 9,
                            "stop_groups": 36, "stop_directions": 144, "stop_judgments": 288, "stop": "budget",
                            "stop_reason": "budget spent: the next look needs 304 judgments, over the 300 allowed",
                            "decided_look": 3, "decided_after_groups": 12, "decided_directions": 48,
                            "decided_judgments": 96}])


@pytest.fixture(scope="module")
def claims_page(tmp_path_factory: pytest.TempPathFactory, browser):  # noqa: F811 (the imported driver fixture)
    folder = tmp_path_factory.mktemp("claims")
    made = _artifacts_fixture._get_wrapped_function()(folder)
    record = made["record"].with_table("claims", CLAIMS).with_table("sequential", SEQUENTIAL)
    page = folder / "explore.html"
    page.write_text(render(page_data(load_inputs(record, run_id="run-1"))), encoding="utf-8")
    browser.set_window_size(WIDTH, 1000)
    browser.get(page.resolve().as_uri() + "#view=overview")
    assert browser.execute_script("return document.body.dataset.ready") == "1", "the page did not finish rendering"
    return browser


def _cells(driver, row: int) -> list[dict]:
    return driver.execute_script("""
      const row = document.querySelectorAll('#claims tr')[arguments[0]];
      return [...row.children].map((c) => { const r = c.getBoundingClientRect();
        return {text: c.innerText.trim(), left: r.left, right: r.right, height: r.height}; });""", row)


def test_status_comes_first_and_the_decisive_numbers_fit_at_1400_px(claims_page) -> None:
    viewport = claims_page.execute_script("return document.documentElement.clientWidth")
    assert viewport <= WIDTH
    head = _cells(claims_page, 0)
    names = [c["text"].replace("\n", " ") for c in head]
    assert names[:7] == ["status", "claim", "effect, decision interval", "p", "p (Holm)", "n", "units"]
    assert "descriptive 95% interval" in names
    assert all(c["right"] <= viewport for c in head[:7]), [(c["text"], c["right"]) for c in head[:7]]
    row = dict(zip(names, _cells(claims_page, 1)))
    assert row["status"]["text"].startswith("inconclusive") and "expected holds" in row["status"]["text"]
    assert row["n"]["text"] == "2,740" and row["units"]["text"] == "51"  # integers, never 2.74e+3
    assert row["directions needed"]["text"] == "1,765" and row["MDE"]["text"] == "12.06"
    assert row["p"]["text"] == "0.82" and row["effect, decision interval"]["text"] == "+4.04 pts [-6.00, +14.00]"
    assert row["descriptive 95% interval"]["text"] == "[-3.57, +11.50]"
    assert row["reason"]["text"] == REASON and row["reason"]["right"] - row["reason"]["left"] <= 600
    assert row["reason"]["height"] > 3 * 14, "the reason is wrapped, not one line thousands of pixels wide"


def test_a_sequential_claim_shows_where_its_sample_stopped_and_the_others_a_dash(claims_page) -> None:
    viewport = claims_page.execute_script("return document.documentElement.clientWidth")
    head = _cells(claims_page, 0)
    names = [c["text"].replace("\n", " ") for c in head]
    assert names[7] == "sequential sample stopped at" and head[7]["right"] <= viewport  # beside p, n and groups
    row = dict(zip(names, _cells(claims_page, 1)))
    assert row["sequential sample stopped at"]["text"].split("\n") == [
        "grader_pairs: look 9, 36 groups · 144 directions · 288 judgments",
        "budget spent: the next look needs 304 judgments, over the 300 allowed",
        "decided at look 3: 12 groups · 48 directions · 96 judgments"]
    assert dict(zip(names, _cells(claims_page, 2)))["sequential sample stopped at"]["text"] == "–"  # the gate


def test_status_and_claim_name_stay_in_view_when_the_table_scrolls_sideways(claims_page) -> None:
    before = _cells(claims_page, 1)
    scrolled = claims_page.execute_script("""
      const box = document.querySelector('#claims').parentElement;
      box.scrollLeft = box.scrollWidth; return box.scrollLeft;""")
    assert scrolled > 0, "the table is wider than the page: it must scroll"
    after = _cells(claims_page, 1)
    assert [(c["left"], c["text"]) for c in after[:2]] == [(c["left"], c["text"]) for c in before[:2]]
    assert after[1]["text"] == "h2_grader_strict_gt_fusion" and after[1]["left"] >= after[0]["right"] - 0.5
    assert after[2]["left"] < before[2]["left"]  # the effect column moved under them
    claims_page.execute_script("document.querySelector('#claims').parentElement.scrollLeft = 0;")
