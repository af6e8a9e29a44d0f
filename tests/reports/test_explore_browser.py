"""The explorer page in a real browser: headless system Chromium, driven by selenium, on the CI subset's results.

The page is the one a user gets: the specs run on the CI subset (the pins' scope) into a
temporary results folder, the publishing step writes ``explore.html`` beside the CSV
tables, and every count the page shows is checked against those tables. Nothing here
downloads a browser or a driver: selenium is given Debian's ``/usr/bin/chromium`` and
``/usr/bin/chromedriver`` explicitly (Selenium Manager is never consulted). Without them
the tests skip with that reason, except where ``NEVIR_REQUIRE_BROWSER=1`` (``.ci/run``)
turns the skip into a failure.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from fixtures.settings import PROJECT_ROOT
from reports.browser import CHROMIUM_FLAGS
from reports.writer import PARTIAL
from tests.reports.test_explore import dense

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
SUBSET = ("--subset-pairs", "24", "--subset-seed", "0", "--grader-sample", "4")  # the CI scope of the pins
SPLIT = "test"


def _require_browser() -> None:
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.is_file()]
    if importlib.util.find_spec("selenium") is None:
        missing.append("the selenium package")
    if missing:
        why = (f"no system browser for the explorer test: {', '.join(missing)} missing "
               "(bash .ci/setup installs Debian's chromium and chromium-driver)")
        if os.environ.get("NEVIR_REQUIRE_BROWSER") == "1":
            pytest.fail(why + "; NEVIR_REQUIRE_BROWSER=1 (CI) does not allow skipping it")
        pytest.skip(why)


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Path:
    """``results/test`` of a specs run on the CI subset, published by the real publishing step.

    The run selects the specs this session selects (``-m "not llm"`` here leaves the grader out there too).
    """
    _require_browser()
    results = tmp_path_factory.mktemp("explore") / "results"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    marks = ("-m", pytestconfig.getoption("markexpr")) if pytestconfig.getoption("markexpr") else ()
    run = subprocess.run([sys.executable, "-m", "pytest", "specs", "-p", "no:cacheprovider", "--benchmark-skip",
                          *SUBSET, *marks, "--splits", SPLIT, "--results-dir", str(results), "-q"],
                         cwd=PROJECT_ROOT, capture_output=True, text=True, env=env, timeout=3600)
    # A run with a selection (-m) is published under <results>/partial/, a complete one in place.
    split = results / (PARTIAL if marks else "") / SPLIT
    page = split / "explore.html"
    assert page.is_file(), f"no {page} (pytest exit {run.returncode}):\n{run.stdout[-4000:]}\n{run.stderr[-2000:]}"
    return split


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory):
    _require_browser()
    from selenium import webdriver  # only where the browser tests run
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.add_argument("--window-size=1440,1000")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def page(browser, published: Path):
    """The page opened from file:// and fully rendered; console messages so far are kept for the last test."""
    browser.get((published / "explore.html").resolve().as_uri())
    assert browser.execute_script("return document.body.dataset.ready") == "1", "the page did not finish rendering"
    return browser


_NONCE = iter(range(10**9))
#: Sets the URL hash and resolves, with the shown direction count, once the page has rendered that state.
_SET_HASH = """const [hash, done] = [arguments[0], arguments[arguments.length - 1]];
window.addEventListener("hashchange", () => done(document.getElementById("count").dataset.count), {once: true});
location.hash = hash;"""


def _set(driver, **state: str) -> int:
    """Put the page in a state through its URL hash (what its links do) and return the shown direction count."""
    state = {"view": "directions", **state, "nonce": str(next(_NONCE))}  # a new hash every time: hashchange fires
    return int(driver.execute_async_script(_SET_HASH, "&".join(f"{k}={v}" for k, v in state.items())))


def _select(driver, element_id: str, value: str) -> None:
    from selenium.webdriver.support.ui import Select  # only where the browser tests run

    Select(driver.find_element("id", element_id)).select_by_value(value)


def test_every_direction_is_a_row(page, published: Path) -> None:
    directions = pd.read_csv(published / "directions.csv")
    assert _set(page, size="all") == len(directions)
    rows = page.find_elements("css selector", "#dirs tbody tr[data-qid]")
    assert sorted(r.get_attribute("data-qid") for r in rows) == sorted(directions["qid"])


def test_each_rankers_failures_match_table2(page, published: Path) -> None:
    table2 = pd.read_csv(published / "table2.csv")
    _set(page)
    checked = 0
    for row in table2.itertuples():
        _select(page, "f-ranker", row.ranker)  # through the visible controls, as a user filters
        _select(page, "f-outcome", "failure")
        shown = int(page.find_element("id", "count").get_attribute("data-count"))
        assert shown == row.n - row.strict, f"{row.ranker}: the page shows {shown} failures, table2.csv n - strict " \
                                            f"= {row.n - row.strict}"
        _select(page, "f-outcome", "success")
        assert int(page.find_element("id", "count").get_attribute("data-count")) == row.strict
        checked += 1
    assert checked == len(table2) > 1


def _a_right_b_wrong(pairwise: pd.DataFrame) -> pd.Series:
    """Directions the first ranker gets right and the second wrong, from pairwise.csv: its own column when it has
    one, else from the discordant count and Δ strict (discordant = ab + ba, Δ·n/100 = ab − ba)."""
    for column in ("first_right_second_wrong", "corrections", "a_right_b_wrong"):
        if column in pairwise.columns:
            return pairwise[column].astype(int)
    return ((pairwise["discordant"] + pairwise["delta_pts"] * pairwise["n"] / 100) / 2).round().astype(int)


def test_disagreement_filter_matches_pairwise_and_table2(page, published: Path) -> None:
    pairwise = pd.read_csv(published / "pairwise.csv")
    assert len(pairwise), "the CI subset has paired comparisons"
    expected = _a_right_b_wrong(pairwise)
    for row, ab in zip(pairwise.itertuples(), expected):
        assert _set(page, a=row.first, b=row.second, dis="ab") == ab, f"{row.first} right, {row.second} wrong"
        ba = row.discordant - ab
        assert _set(page, a=row.first, b=row.second, dis="ba") == ba, f"{row.second} right, {row.first} wrong"
    # Table II's corrections and regressions (ranker vs its compare_to) read off the same filter.
    table2 = pd.read_csv(published / "table2.csv")
    rankers = json.loads((published / "manifest.json").read_text())["profile"]["rankers"]
    compared = 0
    for row in table2.dropna(subset=["corrections"]).itertuples():
        versus = rankers[row.ranker]["compare_to"]
        assert _set(page, a=row.ranker, b=versus, dis="ab") == row.corrections, f"{row.ranker} fixes vs {versus}"
        assert _set(page, a=row.ranker, b=versus, dis="ba") == row.regressions, f"{row.ranker} breaks vs {versus}"
        compared += 1
    assert compared > 0


def test_claims_link_to_their_discordant_directions(page, published: Path) -> None:
    """A claim comparing two rankers links to the directions on which they differ: strict success for a strict
    claim, the preferred passage's position for a position claim (counted here from directions.csv)."""
    claims = pd.read_csv(published / "claims.csv")
    if not {"ranker", "versus"} <= set(claims.columns):
        pytest.skip("claims.csv does not name the compared rankers (ranker, versus columns)")
    directions = pd.read_csv(published / "directions.csv")
    checked = 0
    for claim in claims.dropna(subset=["ranker", "versus"]).itertuples():
        a, b = str(claim.ranker), str(claim.versus)
        if f"{a}__strict" not in directions or f"{b}__strict" not in directions:
            continue
        both = directions[f"{a}__strict"].notna() & directions[f"{b}__strict"].notna()
        measure = getattr(claim, "measure", None)
        position = isinstance(measure, str) and not measure.startswith("strict") and \
            directions[f"{a}__rank_pos"].notna().any() and directions[f"{b}__rank_pos"].notna().any()
        column = "rank_pos" if position else "strict"
        expected = int((both & (directions[f"{a}__{column}"] != directions[f"{b}__{column}"])).sum())
        _set(page, view="overview")
        page.find_element("xpath", f"//table[@id='claims']//tr[.//b[.='{claim.claim}']]//a[@data-state]").click()
        shown = int(page.find_element("id", "count").get_attribute("data-count"))
        assert shown == expected, f"{claim.claim}: {shown} directions linked, {expected} where {a} and {b} differ"
        checked += 1
    assert checked > 0


def test_a_direction_shows_both_passages_and_its_pairs_other_direction(page, published: Path) -> None:
    directions = pd.read_csv(published / "directions.csv", dtype=str).set_index("qid")
    _set(page)
    first = page.find_element("css selector", "#dirs tbody tr[data-qid]")
    qid = first.get_attribute("data-qid")
    first.click()
    panel = page.find_element("id", "direction")
    assert panel.is_displayed()
    pos, neg = page.find_element("id", "passage-pos"), page.find_element("id", "passage-neg")
    assert directions.loc[qid, "preferred_pid"] in pos.text and directions.loc[qid, "counterpart_pid"] in neg.text
    assert len(pos.text) > 100 and len(neg.text) > 100, "both passages' texts are shown"
    assert pos.find_elements("tag name", "mark") + neg.find_elements("tag name", "mark"), \
        "the words that differ between the two passages are highlighted"
    assert page.find_elements("css selector", "#pool tbody tr"), "the top of the pool is shown"
    link = page.find_element("id", "other-direction")
    link.click()
    other = page.find_element("css selector", "#direction h2").text
    assert other != qid and directions.loc[other, "pair_id"] == directions.loc[qid, "pair_id"]
    assert directions.loc[qid, "preferred_pid"] in page.find_element("id", "passage-neg").text, \
        "the other direction prefers this direction's counterpart"
    page.find_element("id", "close").click()
    assert not page.find_element("id", "direction").is_displayed()


def test_text_scores_are_the_rules_scores_in_judgments_csv(page, published: Path) -> None:
    """Every window ranker's text scores and unavailable reasons on the page are judgments.csv's ``rule_score`` and
    ``reason``: its window's judgments, or its designated pairs' for a ranker that scores only those."""
    judgments = pd.read_csv(published / "judgments.csv", dtype={"qid": str, "pid": str, "reason": str})
    directions = pd.read_csv(published / "directions.csv", dtype=str)
    data = page.execute_script("return JSON.parse(document.getElementById('data').textContent)")
    assert set(data["judgments"]) == set(judgments["ranker"]), "each ranker with judgments has its text scores"
    n = len(data["dirs"]["qid"])
    assert data["dirs"]["qid"] == directions["qid"].tolist()
    for ranker, shown in data["judgments"].items():
        mine = judgments[judgments["ranker"] == ranker]
        scope = "window" if (mine["scope"] == "window").any() else "pair"
        table = mine[mine["scope"] == scope].set_index(["qid", "pid"])
        for side, column in (("p", "preferred_pid"), ("n", "counterpart_pid")):
            keys = pd.MultiIndex.from_arrays([directions["qid"], directions[column]])
            expected = table.reindex(keys)
            scores, reasons = dense(shown[f"s{side}"], n), dense(shown[f"e{side}"], n)
            assert [s is None for s in scores] == expected["rule_score"].isna().tolist(), f"{ranker} s{side}"
            assert [s for s in scores if s is not None] == \
                pytest.approx(expected["rule_score"].dropna().tolist(), rel=1e-5), f"{ranker} s{side}"
            assert reasons == [None if pd.isna(r) else r for r in expected["reason"]], f"{ranker} e{side}"


def test_the_published_screenshot_and_size_are_in_the_manifest(published: Path) -> None:
    manifest = json.loads((published / "manifest.json").read_text())["explore"]
    assert manifest["bytes"] == (published / "explore.html").stat().st_size
    assert manifest["screenshot"] == "explore.png", manifest.get("screenshot_skipped")
    assert (published / "explore.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_console_errors(page) -> None:
    _set(page, view="figures")
    _set(page, view="overview")
    for link in page.find_elements("css selector", "#claims a.link")[:5]:
        page.execute_script("arguments[0].click()", link)
    errors = [e for e in page.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    assert not errors, errors
