"""The explorer page's data and file, on a hand-made split of two pairs (the browser test drives the real page)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fixtures.artifacts import write_sealed
from fixtures.code import _closure
from reports import explore, explore_data
from reports.explore import ASSETS, load_inputs, render, write_explore
from reports.explore_data import page_data, top_of
from reports.record import Artifact, SplitRecord
from reports.measures import shown_in
from reports.tables import judgments_table
from rankers.base import Ranking

TEXTS = {"pA": "The film was not a success at the box office.", "pB": "The film was a success at the box office.",
         "pC": "Rain fell on the plain.", "pD": "Rain never fell on the plain.",
         "pX": "An unrelated passage </script><script>alert(1)</script> with markup."}


def _population() -> pd.DataFrame:
    """Two pairs: p1 (both directions eligible), p2 (its second direction not covered by the pool)."""
    return pd.DataFrame({
        "qid": ["p1_q1", "p1_q2", "p2_q1", "p2_q2"], "pair_id": ["p1", "p1", "p2", "p2"], "direction": [1, 2, 1, 2],
        "split": "test", "group": ["g1", "g1", "g2", "g2"], "query": ["flop?", "hit?", "dry?", "rain?"],
        "preferred_pid": ["pA", "pB", "pD", "pC"], "counterpart_pid": ["pB", "pA", "pC", "pD"],
        "eligible": [True, True, True, False], "conflict": False, "covered": [True, True, True, False]})


def _outcomes(strict, tie, fallback, ranks=True) -> pd.DataFrame:
    frame = pd.DataFrame({"qid": ["p1_q1", "p1_q2", "p2_q1"], "strict": strict, "tie": tie, "fallback": fallback})
    if ranks:
        frame["rank_pos"], frame["rank_neg"] = [1, 3, 2], [2, 1, 1]
    else:
        frame["rank_pos"] = frame["rank_neg"] = pd.array([pd.NA] * 3, dtype="Int64")
    return frame


def _scored() -> pd.DataFrame:
    """A grader's frame: the argmax grade as score, the probabilities in usage; one row repeated, one unavailable."""
    probs = {"pA": [0.0, 0.1, 0.2, 0.3, 0.4], "pB": [0.1, 0.1, 0.1, 0.3, 0.4]}
    rows = [("p1_q1", "pA"), ("p1_q1", "pB"), ("p1_q1", "pA"), ("p2_q1", "pD")]
    return pd.DataFrame({
        "qid": [q for q, _ in rows], "pid": [p for _, p in rows], "score": [4.0, 4.0, 4.0, np.nan],
        "error": [None, None, None, "timeout"], "raw": ["4", "4", "4", ""],
        "usage": [{"grade_probs": probs[p], "grade_margin": 0.1, "near_tie": 0.0} if p in probs else {} for _, p in rows]})


#: What the grader's window rule reads (expected grades), not the stored argmax grade (4.0).
RULE = {("p1_q1", "pA"): 3.0, ("p1_q1", "pB"): 2.9}


def _judgments(scope: str, rule: dict[tuple[str, str], float] = RULE) -> pd.DataFrame:
    """The grader's judgments artifact of one scope, as test_cost_and_replays stashes it."""
    return judgments_table(_scored(), "grader", scope, rule, bounded=True)


def test_numbers_are_rounded_to_significant_digits_and_missing_ones_are_null() -> None:
    values = [0.15761234, 15.912345, 123456.7, -0.00012345678, 3.0, 0.0, np.nan, np.inf, None, 12.5]
    assert explore_data._column(values, 4) == [0.1576, 15.91, 123500, -0.0001235, 3, 0, None, None, None, 12.5]
    assert explore_data._column(pd.array([1, pd.NA, 250], dtype="Int64")) == [1, None, 250]
    assert explore_data._sparse([None, 2.5, None, None]) == {"i": [1], "v": [2.5]}
    assert explore_data._sparse([1, None, 3, None]) == [1, None, 3, None], "half full or more stays a list"
    assert json.dumps(explore_data._column([0.1 + 0.2, 1 / 3], 6)) == "[0.3, 0.333333]"


@pytest.fixture
def artifacts(tmp_path: Path) -> dict[str, object]:
    """A split's record: its report tables and the sealed artifact files it names, as the specs hand them over."""
    made = []

    def put(kind: str, frame: pd.DataFrame, ranker: str = "", scope: str = "") -> None:
        path = tmp_path / f"{'-'.join(p for p in (kind, ranker, scope) if p)}.parquet"
        write_sealed(path, lambda p: frame.to_parquet(p, index=False))
        made.append(Artifact(kind, path, ranker, scope))

    put("population", _population())
    put("outcomes", _outcomes([True, False, True], [False, False, False], [False, False, False]), "fusion")
    put("outcomes", _outcomes([True, False, False], [False, True, False], [False, False, True], ranks=False),
        "grader")
    put("judgments", _judgments("window"), "grader", "window")
    put("judgments", _judgments("pair", {("p1_q1", "pA"): 1.0, ("p1_q1", "pB"): 0.0}), "grader", "pair")
    put("branches", pd.DataFrame({"qid": ["p1_q1", "p1_q2", "p2_q1"],
                                  "branch": ["equal_score", "different_score", "outside_window_or_fallback"]}),
        "grader")
    put("corpus", pd.DataFrame({"pid": list(TEXTS), "text": list(TEXTS.values())}))
    pool = pd.DataFrame({"qid": ["p1_q1"] * 3 + ["p1_q2"] * 3 + ["p2_q1"] * 3 + ["p2_q2"] * 2,
                         "pid": ["pA", "pB", "pX", "pB", "pX", "pA", "pD", "pC", "pX", "pD", "pX"]})
    pool["rank"] = pool.groupby("qid").cumcount() + 1
    for i, route in enumerate(("dense", "sparse", "bm25")):
        pool[f"{route}_score"] = 1.0 / (pool["rank"] + i)
        pool[f"{route}_rank"] = pool["rank"].astype(float)
    put("pool", pool.drop(columns="rank"))
    put("top", top_of(Ranking("fusion", pool.assign(k0=-pool["rank"], k1=0.0, k2=0.0)[
        ["qid", "pid", "rank", "k0", "k1", "k2"]]), k=3), "fusion")
    table2 = pd.DataFrame({"ranker": ["fusion", "grader"], "n": [3, 3], "strict": [2, 1], "strict_pct": [66.7, 33.3],
                           "mrr": [0.61, np.nan], "corrections": [np.nan, 1.0], "regressions": [np.nan, 2.0]})
    tables = {"table2": table2,
              "claims": pd.DataFrame({"claim": ["h2_grader_strict_gt_fusion"], "status": ["inconclusive"],
                                      "effect": [-33.3], "lo": [-100.0], "hi": [33.3], "p_value": [0.5]})}
    entries = {"code_commit": "abc123",
               "profile": {"name": "tiny", "rankers": {"fusion": {"kind": "fusion", "compare_to": "fusion"},
                                                       "grader": {"kind": "llm_grader", "compare_to": "fusion",
                                                                  "reference": "fusion", "label": "LLM grader"}}}}
    return {"record": SplitRecord("test", tables, entries, tuple(made)), "dir": tmp_path}


def test_page_meta_names_the_dataset_and_its_digest(artifacts) -> None:
    """The page says which dataset its numbers come from (the manifest's ``dataset`` entry), NevIR or a pair set."""
    record = artifacts["record"]
    assert page_data(load_inputs(record, run_id="run-1"))["meta"]["dataset"] is None  # a record without one
    dataset = {"name": "policy_pairs", "kind": "pairs", "digest": "ab" * 32}
    named = SplitRecord(record.split, record.tables, {**record.entries, "dataset": dataset}, record.artifacts)
    assert page_data(load_inputs(named, run_id="run-1"))["meta"]["dataset"] == dataset
    assert "m.dataset.name" in (ASSETS / "explore.js").read_text(encoding="utf-8")  # and the header shows it


def without(record: SplitRecord, name: str) -> SplitRecord:
    """The record less one artifact (by its manifest name)."""
    return SplitRecord(record.split, record.tables, record.entries, tuple(a for a in record.artifacts
                                                                          if a.name != name))


def dense(column, n: int) -> list:
    """What the page does with a sparse column ({"i": indices, "v": values}) on load."""
    if isinstance(column, list):
        return column
    out = [None] * n
    for i, v in zip(column["i"], column["v"]):
        out[i] = v
    return out


def test_page_data_aligns_every_column_with_the_directions(artifacts) -> None:
    data = page_data(load_inputs(artifacts["record"], run_id="run-1"))
    for group in (*data["outcomes"].values(), *data["judgments"].values(), data["pool"]["text"]):
        for key, column in group.items():
            if not isinstance(column, str):
                group[key] = dense(column, len(data["pool"]["pid"]) if group is data["pool"]["text"] else 4)
    assert data["dirs"]["qid"] == ["p1_q1", "p1_q2", "p2_q1", "p2_q2"]
    assert data["meta"] | {"n_directions": 4, "profile": "tiny", "commit": "abc123", "run_id": "run-1"} == data["meta"]
    # 1 success, 2 wrong order, 3 tie, 0 not evaluated (p2_q2 is not eligible)
    assert data["outcomes"]["fusion"]["o"] == "1210" and data["outcomes"]["fusion"]["f"] == "0000"
    assert data["outcomes"]["grader"]["o"] == "1320" and data["outcomes"]["grader"]["f"] == "0010"
    assert data["outcomes"]["fusion"]["rp"] == [1, 3, 2, None] and data["outcomes"]["grader"]["rp"] == [None] * 4
    assert data["branches"]["grader"] == "edo-"
    g = data["judgments"]["grader"]  # the window's judgments (its pair-only ones are Table III's)
    assert g["sp"] == [3, None, None, None] and g["sn"] == [2.9, None, None, None], "the rule's scores, not 4"
    assert g["gp"][0] == [0, 0.1, 0.2, 0.3, 0.4] and g["gn"][0] == [0.1, 0.1, 0.1, 0.3, 0.4] and g["gp"][1] is None
    assert g["mp"][0] == 0.1 and g["tp"][0] == 0 and g["mp"][1] is None and g["tp"][1] is None
    assert g["ep"][2] == "timeout" and g["sp"][2] is None and g["en"][0] is None
    assert [r["window"] for r in data["rankers"]] == [False, True]
    assert "fusion" not in data["judgments"], "a full-pool ranker has no text scores"
    # Every text is stored once, looked up by index: the passages of both directions and the pool's.
    assert sorted(data["pids"]) == sorted(TEXTS) and len(data["passages"]) == len(set(data["passages"]))
    assert [data["pids"][k] for k in data["dirs"]["pos"]] == ["pA", "pB", "pD", "pC"]
    pool = data["pool"]
    assert pool["start"] == [0, 3, 6, 9, 11] and data["meta"]["reference"] == "fusion"
    assert [data["pids"][k] for k in pool["pid"][3:6]] == ["pB", "pX", "pA"]
    assert pool["routes"] == ["dense", "sparse", "bm25"] and pool["dense_rank"][:3] == [1, 2, 3]
    assert pool["text"]["grader"][:3] == [3, 2.9, None], "the grader's window scores beside the pool"
    # Table II: every column the table has (the page's rows), and the columns it shows described by the registry.
    assert data["table2"][0] == {"ranker": "fusion", "n": 3, "strict": 2, "strict_pct": 66.7, "mrr": 0.61,
                                 "corrections": None, "regressions": None}
    assert data["table2_columns"] == explore_data.table2_columns()
    assert [c["name"] for c in data["table2_columns"]] == [m.name for m in shown_in("explorer")]


def test_a_claim_on_a_sequential_sample_carries_where_the_sample_stopped(artifacts) -> None:
    assert page_data(load_inputs(artifacts["record"], run_id="run-1"))["sequential"] == {}
    stop = pd.DataFrame([{"claim": "h2_grader_strict_gt_fusion", "sample": "grader_pairs", "look": 9.0,
                          "stop_groups": 36.0, "stop_directions": 144.0, "stop_judgments": 288.0, "stop": "budget",
                          "stop_reason": "budget spent", "decided_look": np.nan, "decided_after_groups": np.nan,
                          "decided_directions": np.nan, "decided_judgments": np.nan}])  # as pandas reads the CSV
    data = page_data(load_inputs(artifacts["record"].with_table("sequential", stop), run_id="run-1"))
    assert data["sequential"] == {"h2_grader_strict_gt_fusion": {
        "sample": "grader_pairs", "look": 9, "groups": 36, "directions": 144, "judgments": 288, "stop": "budget",
        "reason": "budget spent", "decided_look": None, "decided_groups": None, "decided_directions": None,
        "decided_judgments": None}}
    assert json.loads(json.dumps(data["sequential"], allow_nan=False)) == data["sequential"]  # whole numbers, no NaN


def test_a_designated_only_ranker_shows_its_pair_judgments(artifacts) -> None:
    """A ranker that scores only the designated pairs has no window judgments: the page reads its pairs'."""
    data = page_data(load_inputs(without(artifacts["record"], "judgments:grader:window")))
    g = data["judgments"]["grader"]
    assert g["sp"] == {"i": [0], "v": [1]} and g["sn"] == {"i": [0], "v": [0]}
    assert [r["window"] for r in data["rankers"]] == [False, True] and data["meta"]["reference"] == "fusion"
    assert data["pool"]["text"]["grader"] == {"i": [0, 1], "v": [1, 0]}


def test_the_page_is_self_contained_and_its_data_round_trips(artifacts) -> None:
    data = page_data(load_inputs(artifacts["record"], run_id="run-1"))
    page = render(data)
    for asset in ASSETS.iterdir():  # nothing the page loads comes from the network
        assert not re.search(r"https?://|//cdn|@import", asset.read_text(encoding="utf-8")), asset
    assert page.count("</script>") == 2, "a passage's markup cannot close the data block"
    embedded = re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S).group(1)
    assert json.loads(embedded) == json.loads(json.dumps(data))


def test_write_explore_reports_its_size_and_refuses_an_oversized_page(artifacts, monkeypatch) -> None:
    out = artifacts["dir"] / "out"
    out.mkdir()
    monkeypatch.setenv("NEVIR_CHROMIUM", str(out / "no-such-browser"))
    entry = write_explore(out, artifacts["record"])
    assert entry["bytes"] == (out / "explore.html").stat().st_size > 0
    assert entry["screenshot"] is None and "no system Chromium" in entry["screenshot_skipped"]
    monkeypatch.setattr(explore, "MAX_PAGE_BYTES", entry["bytes"] - 1)
    (out / "explore.html").unlink()
    with pytest.raises(ValueError, match=r"test: explore\.html would be .* over the .*-byte limit"):
        write_explore(out, artifacts["record"])
    assert not (out / "explore.html").exists()


def test_inputs_without_a_population_are_refused_by_name(artifacts) -> None:
    with pytest.raises(ValueError, match="population artifact"):
        load_inputs(without(artifacts["record"], "population"))


def test_a_rerun_on_the_same_results_reuses_the_pages_data_and_stamps_its_own_run(artifacts, monkeypatch) -> None:
    cache, first, second = (artifacts["dir"] / name for name in ("cache", "first", "second"))
    for folder in (first, second):
        folder.mkdir()
    monkeypatch.setenv("NEVIR_CHROMIUM", str(cache / "no-such-browser"))
    write_explore(first, artifacts["record"], run_id="run-1", cache_dir=cache)
    monkeypatch.setattr(explore, "page_data", lambda inputs: pytest.fail("the data were recomputed"))
    record = artifacts["record"]
    rerun = SplitRecord("test", record.tables, {**record.entries, "code_commit": "def456"}, record.artifacts)
    write_explore(second, rerun, run_id="run-2", cache_dir=cache)
    page = (second / "explore.html").read_text(encoding="utf-8")
    assert '"run_id":"run-2"' in page and '"commit":"def456"' in page and "run-1" not in page
    assert page.replace("run-2", "run-1").replace("def456", "abc123") == \
        (first / "explore.html").read_text(encoding="utf-8")
    changed = rerun.with_table("table2", rerun.tables["table2"].assign(strict=[3, 1]))
    with pytest.raises(pytest.fail.Exception, match="recomputed"):
        write_explore(second, changed, run_id="run-2", cache_dir=cache)
    # The code that makes the data is the module's whole import closure (the payload lives in explore_data).
    assert "reports.explore_data" in _closure(("reports.explore",))[0]
    monkeypatch.setattr(explore, "code_digest", lambda name: "another version of the page's code")
    with pytest.raises(pytest.fail.Exception, match="recomputed"):
        write_explore(second, rerun, run_id="run-2", cache_dir=cache)
