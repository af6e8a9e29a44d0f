"""Every text a page or report shows is escaped for where it goes: no name, label or text of a run runs as script.

The probe: a profile named ``xss</title><script>alert('T')</script>`` went unescaped into the
explorer page's ``<title>`` (the script ran when the page was opened); a ranker name holding ``"``
landed in a ``data-sort`` attribute (an ``onmouseover`` fired on hover); a label ``<!--<script>``
left the page blank; a label ``<!--TITLE-->`` stopped the run from publishing; a ``|`` in a label
shifted its row of report.md's Table II. Here every field the page shows holds markup — profile,
ranker names and labels, claims, queries, passages, source groups, unavailable reasons — and the
page is opened in headless Chromium (``tests/reports/test_explore_browser.py``'s driver) with
``alert``, ``confirm``, ``prompt`` and ``console`` hooked before any script of the page runs. No hook
may fire, no element may carry an event-handler attribute, and each text reads back verbatim.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fixtures.artifacts import seal
from rankers.base import Ranking
from reports.explore import load_inputs, render
from reports.explore_data import page_data, top_of
from reports.record import Artifact, SplitRecord
from reports.render import md_code, md_escape, table2_latex, tex_escape
from reports.measures import TABLE2_ROW_COLUMNS
from reports.tables import judgments_table
from reports.writer import publish, with_labels
from tests.reports.test_explore_browser import _require_browser, browser  # noqa: F401 (the driver fixture)

PROFILE = "xss</title><script>alert('T')</script>"
#: Two rankers whose names and labels break every context they are written into.
NAME_A = 'fu"sion\' onmouseover="alert(\'A\')" x="<svg onload=alert(\'a\')>'
NAME_B = "g</script><!--<script>alert('B')</script>"
LABEL_A = "<!--TITLE-->"
LABEL_B = "<!--<script> | l|abel <img src=x onerror=alert('L')> & `tick` \\ {}"
QUERIES = ["<script>alert('Q1')</script> flop?", "hit? <img src=x onerror=alert('Q2')>", "dry?</textarea>",
           "rain? &amp;"]
TEXTS = {"pA": "The film was not a success <b onmouseover=alert('P')>at</b> the box office.",
         "pB": "The film was a success at the box office </script><script>alert('P2')</script>.",
         "pC": "Rain fell on the plain <!-- and -->.", "pD": "Rain never fell on the plain ]]> <![CDATA[ x",
         "pX": "An unrelated passage <iframe src=javascript:alert('X')></iframe>"}
GROUP = "<svg/onload=alert('G')>"
CLAIM = "h2_<script>alert('C')</script>"
REASON = "timeout <img src=x onerror=alert('R')>"
#: What the page's script hooks record: every alert, confirm, prompt and console call, before the page's code runs.
HOOKS = """window.__fired = [];
for (const name of ["alert", "confirm", "prompt"])
  window[name] = (...a) => { window.__fired.push([name, ...a].join(" ")); };
for (const name of ["log", "warn", "error", "info"]) {
  const real = console[name].bind(console);
  console[name] = (...a) => { window.__fired.push(["console." + name, ...a].join(" ")); real(...a); };
}
window.addEventListener("error", (e) => window.__fired.push("error " + e.message));"""


def _artifacts(tmp_path: Path) -> SplitRecord:
    made = []

    def put(kind: str, frame: pd.DataFrame, ranker: str = "", scope: str = "") -> None:
        path = tmp_path / f"{len(made)}.parquet"
        frame.to_parquet(path, index=False)
        seal(path)  # as the specs hand cached artifacts to the publisher
        made.append(Artifact(kind, path, ranker, scope))

    qids = ["p1_q1", "p1_q2", "p2_q1", "p2_q2"]
    put("population", pd.DataFrame({
        "qid": qids, "pair_id": ["p1", "p1", "p2", "p2"], "direction": [1, 2, 1, 2], "split": "test",
        "group": [GROUP, GROUP, "g2", "g2"], "query": QUERIES, "preferred_pid": ["pA", "pB", "pD", "pC"],
        "counterpart_pid": ["pB", "pA", "pC", "pD"], "eligible": True, "conflict": False, "covered": True}))
    outcomes = pd.DataFrame({"qid": qids, "strict": [True, False, True, False], "tie": False, "fallback": False,
                             "rank_pos": [1, 3, 2, 2], "rank_neg": [2, 1, 1, 1]})
    put("outcomes", outcomes, NAME_A)
    put("outcomes", outcomes.assign(strict=[False, True, True, True]), NAME_B)
    rows = [("p1_q1", "pA"), ("p1_q1", "pB"), ("p2_q1", "pD"), ("p2_q1", "pC")]
    scored = pd.DataFrame({"qid": [q for q, _ in rows], "pid": [p for _, p in rows], "score": [3.0, 2.0, np.nan, 1.0],
                           "error": [None, None, REASON, None], "raw": ["3", "2", "", "1"], "usage": [{}] * 4})
    put("judgments", judgments_table(scored, NAME_B, "window", {r: 1.0 for r in rows}, bounded=True), NAME_B, "window")
    put("corpus", pd.DataFrame({"pid": list(TEXTS), "text": list(TEXTS.values())}))
    pool = pd.DataFrame({"qid": [q for q in qids for _ in range(3)],
                         "pid": ["pA", "pB", "pX", "pB", "pX", "pA", "pD", "pC", "pX", "pC", "pD", "pX"]})
    pool["rank"] = pool.groupby("qid").cumcount() + 1
    for route in ("dense", "sparse", "bm25"):
        pool[f"{route}_score"], pool[f"{route}_rank"] = 1.0 / pool["rank"], pool["rank"].astype(float)
    put("pool", pool.drop(columns="rank"))
    put("top", top_of(Ranking(NAME_A, pool.assign(k0=-pool["rank"], k1=0.0, k2=0.0)[
        ["qid", "pid", "rank", "k0", "k1", "k2"]]), k=3), NAME_A)
    table2 = pd.DataFrame({"ranker": [NAME_A, NAME_B], "n": [4, 4], "strict": [2, 3], "strict_pct": [50.0, 75.0],
                           "mrr": [0.6, 0.7], "delta_pts": [np.nan, 25.0], "delta_lo": [np.nan, 0.0],
                           "delta_hi": [np.nan, 50.0], "corrections": [np.nan, 2.0], "regressions": [np.nan, 1.0]})
    tables = {"table2": table2,
              "claims": pd.DataFrame({"claim": [CLAIM], "family": ["H2"], "status": ["inconclusive"],
                                      "ranker": [NAME_B], "versus": [NAME_A], "measure": ["strict"],
                                      "effect": [25.0], "lo": [0.0], "hi": [50.0], "n": [4], "measured": [REASON]}),
              "pairwise": pd.DataFrame({"first": [NAME_B], "second": [NAME_A], "n": [4], "delta_pts": [25.0]})}
    entries = {"code_commit": "<b>c</b>",
               "profile": {"name": PROFILE, "rankers": {
                   NAME_A: {"kind": "fusion", "label": LABEL_A},
                   NAME_B: {"kind": "llm_grader", "compare_to": NAME_A, "reference": NAME_A, "label": LABEL_B}}}}
    return SplitRecord("test", tables, entries, tuple(made))


@pytest.fixture(scope="module")
def page_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hostile")
    path = folder / "explore.html"
    path.write_text(render(page_data(load_inputs(_artifacts(folder), run_id="run\"1"))), encoding="utf-8")
    return path


def test_the_page_file_keeps_every_text_inside_its_data_and_title(page_file: Path) -> None:
    """Without a browser: one title, two scripts, and the data block holds no ``<`` that could end it."""
    html = page_file.read_text(encoding="utf-8")
    assert html.count("<title>") == 1 and html.count("</title>") == 1
    title = "Explorer · test · xss&lt;/title&gt;&lt;script&gt;alert(&#x27;T&#x27;)&lt;/script&gt;"
    assert f"<title>{title}</title>" in html
    assert html.count("<script") == 2 and html.count("</script>") == 2
    data = re.search(r'<script type="application/json" id="data">(.*?)</script>', html, re.S).group(1)
    assert "<" not in data and ">" not in data
    assert json.loads(data)["meta"]["profile"] == PROFILE and "<!--TITLE-->" not in html.split("<title>")[1]


@pytest.fixture(scope="module")
def hooked(browser, page_file: Path):  # noqa: F811 (the imported driver fixture)
    """The hostile page opened with the hooks installed before its own scripts."""
    browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": HOOKS})
    browser.get(page_file.resolve().as_uri())
    assert browser.execute_script("return document.body.dataset.ready") == "1", "the page did not finish rendering"
    return browser


def _visit(driver, state: str, hover: bool = True) -> None:
    """Put the page in a state through its URL hash and hover each element that shows a name or a text (an
    injected handler would fire)."""
    from selenium.common.exceptions import WebDriverException  # only where the browser tests run
    from selenium.webdriver.common.action_chains import ActionChains

    driver.execute_script("location.hash = arguments[0];", state)
    assert driver.execute_script("return document.body.dataset.ready") == "1"
    if not hover:
        return
    hovered = 0
    for element in driver.find_elements("css selector", "th, td.wrap, td.q, td.o, td.snippet, .passage, .query, "
                                                        "a.link, h2, h3"):
        if element.is_displayed():
            try:
                ActionChains(driver).move_to_element(element).perform()
                hovered += 1
            except WebDriverException:  # covered by the open direction view: not reachable by a pointer
                continue
    assert hovered > 0


def _injected(driver) -> list[str]:
    """Event-handler attributes or elements that only an unescaped text could have made."""
    return driver.execute_script("""
      const out = [];
      for (const e of document.querySelectorAll("*")) {
        for (const a of e.attributes) if (a.name.startsWith("on")) out.push(e.tagName + " " + a.name);
        if (["IFRAME", "svg", "SCRIPT"].includes(e.tagName) && !(e.tagName === "SCRIPT" && e.parentElement === document.body))
          out.push("element " + e.tagName);
        if (e.tagName === "IMG" && !e.src.startsWith("data:image/png")) out.push("img " + e.src);
        // Inside a shown text only the page's own marks: the words that differ, a passage's heading, a fold.
        if (e.closest(".passage, .query, td.q, td.snippet") && !["MARK", "H3", "SPAN", "DETAILS", "SUMMARY"].includes(e.tagName)
            && !e.matches(".passage, .query, td.q, td.snippet")) out.push("in a text: " + e.tagName);
      }
      return out;""")


def test_no_text_runs_as_script_in_any_view_and_each_reads_back_verbatim(hooked) -> None:
    driver = hooked
    assert driver.title == f"Explorer · test · {PROFILE}"
    assert PROFILE in driver.find_element("id", "meta").text
    names = [e.text for e in driver.find_elements("css selector", "#table2 td.wrap b")]
    labels = [e.text for e in driver.find_elements("css selector", "#table2 td.wrap span")]
    assert names == [NAME_A, NAME_B] and labels == [LABEL_A, LABEL_B]
    assert CLAIM in driver.find_element("id", "claims").text
    _visit(driver, "#view=overview")
    _visit(driver, f"#view=directions&size=all&r={json.dumps(NAME_B)[1:-1]}")
    sorts = [e.get_attribute("data-sort") for e in driver.find_elements("css selector", "#dirs th.rk")]
    assert sorts == [f"o:{NAME_A}", f"o:{NAME_B}"]
    queries = [e.text for e in driver.find_elements("css selector", "#dirs td.q")]
    assert queries == [q.strip() for q in QUERIES]
    assert driver.find_elements("css selector", "#dirs tbody td")[3].text == GROUP
    for qid, pos in (("p1_q1", "pA"), ("p2_q1", "pD")):
        _visit(driver, f"#view=directions&d={qid}")
        assert driver.find_element("id", "passage-pos").get_attribute("textContent").endswith(TEXTS[pos])
        assert TEXTS["pX"][:60] in driver.find_element("id", "pool").text
    assert REASON in driver.find_element("css selector", "#rankers-here .tag.warn").get_attribute("title")
    _visit(driver, "#view=figures", hover=False)
    assert driver.execute_script("return window.__fired") == []
    assert _injected(driver) == []


def test_labels_that_look_like_markup_do_not_break_publishing_or_report_md(tmp_path: Path) -> None:
    """``<!--TITLE-->`` as a label once stopped the run from publishing; a ``|`` shifted report.md's row."""
    record = _artifacts(tmp_path)
    row_values = {"paired": 1, "paired_n": 2, "paired_pct": 50.0, "pref_at_1": 25.0, "ties": 0, "fallback": 0,
                  "mean_rank_pos": 2.0, "mean_rank_neg": 3.0}  # as the fake project's rows: what the figures need
    full = pd.DataFrame([{**dict.fromkeys(TABLE2_ROW_COLUMNS, np.nan), **row_values, **row}
                         for row in record.tables["table2"].to_dict("records")])
    split = SplitRecord("test", {**record.tables, "table2": full}, {**record.entries, "code_commit": "abc"},
                        record.artifacts)
    [folder] = publish(tmp_path / "results", "r1", {"test": split}).values()
    html = (folder / "explore.html").read_text(encoding="utf-8")
    assert html.count("<title>") == 1 and "<!--TITLE-->" not in html
    report = (folder / "report.md").read_text(encoding="utf-8")
    table = report.split("## Table II")[1].split("\n## ")[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    header = rows[0]
    widths = {len(re.split(r"(?<!\\)\|", line)) for line in rows}
    assert len(widths) == 1, f"a row of Table II has another number of cells:\n{table}"
    assert md_escape(LABEL_B) in table and md_escape(NAME_B) in table and "label" in header
    ours = report.split("## Reference: the paper's")[0]  # the paper's own table is no text of this run
    prose = re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", ours)  # code spans show markup as text
    assert not re.search(r"(?<!\\)<", prose), "raw markup outside a code span"
    assert f"Profile {md_code(PROFILE)}" in report
    tex = table2_latex(with_labels(full, record.declared), "test", PROFILE, "abc")
    assert tex_escape(LABEL_B) in tex and tex_escape(NAME_B) in tex
