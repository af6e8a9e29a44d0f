"""Independent oracle: MRR, Success@k and nDCG@10 from the exported TREC files, by ir_measures on pytrec_eval
(trec_eval's C code), and strict preference, ties and paired accuracy by NevIR's own definition on the files' scores,
equal the suite's own direction-level numbers (``tests.support.oracle``; on a published run end to end:
``tests/harness/test_end_to_end.py``)."""
from __future__ import annotations

from pathlib import Path

import math

import ir_measures
import numpy as np
import pandas as pd
import pytest

from fixtures.populations import annotate_population
from rankers.base import rank_by_keys, single_score_ranking
from rankers.trec import write_qrels, write_run
from rankers.window import designated_outcomes
from reports.measures import summarize
from reports.outcomes import direction_outcomes
from tests.support import oracle as outside

MEASURES = [ir_measures.RR, ir_measures.Success @ 1, ir_measures.Success @ 3, ir_measures.Success @ 10,
            ir_measures.nDCG @ 10]


def oracle(run: Path, qrels: Path) -> pd.DataFrame:
    """Per-query RR, Success@k and nDCG@10 computed by pytrec_eval from the files alone (qid-indexed, one column each),
    the list order from the run's rank column (its equal scores are ties)."""
    assert ir_measures.pytrec_eval.is_available()
    judged = pd.Index(sorted({q.query_id for q in ir_measures.read_trec_qrels(str(qrels))}))
    return outside.positions(outside.read_run(run), qrels, judged)


def assert_oracle_agrees(ranking, directions: pd.DataFrame, tmp_path: Path) -> pd.DataFrame:
    outcomes = direction_outcomes(ranking, directions)
    row = summarize(outcomes, directions, n_resamples=10)
    got = oracle(write_run(ranking, tmp_path / "run.trec"), write_qrels(directions, tmp_path / "qrels.txt"))
    assert sorted(got.index) == sorted(outcomes["qid"])  # exactly Q_c: conflicts and uncovered are not judged
    by_qid = outcomes.set_index("qid").loc[got.index]
    rank = by_qid["rank_pos"].to_numpy(dtype=float)
    assert got["RR"].to_numpy() == pytest.approx(1.0 / rank, rel=1e-12)
    assert got["RR"].mean() == pytest.approx(row["mrr"], rel=1e-12)
    for k in (1, 3, 10):
        assert got[f"Success@{k}"].to_numpy().tolist() == (rank <= k).astype(float).tolist()
        assert 100 * got[f"Success@{k}"].mean() == pytest.approx(row[f"pref_at_{k}"], rel=1e-12)
    # qrels judge the preferred passage 1, nothing else: the ideal DCG is 1, nDCG@10 = 1/log2(1 + r+) in the top 10.
    assert got["nDCG@10"].to_numpy() == pytest.approx(np.where(rank <= 10, 1 / np.log2(1 + rank), 0.0), rel=1e-12)
    assert got["nDCG@10"].mean() == pytest.approx(row["ndcg_at_10"], rel=1e-12)
    return got


#: Ties everywhere: D1_q1's preferred "b" ties "a" and "c" on the top key (positions set by id: a, b, c);
#: D1_q2's preferred "c" ties the same two; D2 ties all five passages; D3 is a conflict (not judged).
TIED = pd.DataFrame([
    ("D1_q1", "a", 0.5), ("D1_q1", "b", 0.5), ("D1_q1", "c", 0.5), ("D1_q1", "d", 0.9),
    ("D1_q2", "a", 0.7), ("D1_q2", "b", 0.1), ("D1_q2", "c", 0.7), ("D1_q2", "d", 0.7),
    *[(q, p, 0.3) for q in ("D2_q1", "D2_q2") for p in "abcde"],
    ("D3_q1", "a", 0.2), ("D3_q1", "b", 0.1), ("D3_q2", "a", 0.2), ("D3_q2", "b", 0.1),
], columns=["qid", "pid", "score"])


def tied_directions() -> pd.DataFrame:
    d = pd.DataFrame({"qid": ["D1_q1", "D1_q2", "D2_q1", "D2_q2", "D3_q1", "D3_q2"],
                      "pair_id": ["D1", "D1", "D2", "D2", "D3", "D3"], "split": "test",
                      "preferred_pid": ["b", "c", "e", "a", "a", "b"], "counterpart_pid": ["a", "b", "a", "e", "b", "a"],
                      "group": ["g1", "g1", "g2", "g2", "g3", "g3"], "conflict": [False] * 4 + [True] * 2})
    return annotate_population(d, TIED)


def test_oracle_on_tied_scores_by_hand(tmp_path):
    ranking = single_score_ranking(TIED, TIED["score"].to_numpy(), "fusion")
    got = assert_oracle_agrees(ranking, tied_directions(), tmp_path)
    # By hand (ties by id ascending): D1_q1 d, a, b -> 3; D1_q2 a, c, d -> 2; D2_q1 a..e -> 5; D2_q2 -> 1.
    assert got["RR"].to_dict() == pytest.approx({"D1_q1": 1 / 3, "D1_q2": 1 / 2, "D2_q1": 1 / 5, "D2_q2": 1.0})
    assert got["Success@3"].to_dict() == {"D1_q1": 1.0, "D1_q2": 1.0, "D2_q1": 0.0, "D2_q2": 1.0}


def test_trec_evals_own_tie_order_would_mislead_the_oracle(tmp_path):
    """Why the oracle reads the rank column: the run carries the ranker's tied scores, and pytrec_eval re-breaks ties
    by document id descending, so D2_q1's preferred "e" would move from rank 5 to rank 1."""
    ranking = single_score_ranking(TIED, TIED["score"].to_numpy(), "fusion")
    run = write_run(ranking, tmp_path / "run.trec")
    docs = list(ir_measures.read_trec_run(str(run)))
    got = {m.query_id: m.value for m in ir_measures.iter_calc([ir_measures.RR], ir_measures.read_trec_qrels(
        str(write_qrels(tied_directions(), tmp_path / "qrels.txt"))), docs)}
    assert got["D2_q1"] == 1.0 and got["D2_q2"] == pytest.approx(1 / 5)
    assert oracle(run, tmp_path / "qrels.txt").at["D2_q1", "RR"] == pytest.approx(1 / 5)


def test_strict_ties_and_paired_from_the_files_scores_by_nevirs_rule(tmp_path):
    """NevIR's definition read from the run's scores (the preferred passage strictly above its counterpart; a pair
    right when both directions are) gives the suite's strict preference, ties and paired accuracy, ties included."""
    d = tied_directions()
    ranking = single_score_ranking(TIED, TIED["score"].to_numpy(), "fusion")
    row = summarize(direction_outcomes(ranking, d), d, n_resamples=10)
    pos, neg, qids = outside.keyed(outside.read_run(write_run(ranking, tmp_path / "run.trec")),
                                   d.set_index("qid").loc[d["eligible"].to_numpy(dtype=bool)])
    assert list(qids) == ["D1_q1", "D1_q2", "D2_q1", "D2_q2"]
    assert (int((pos > neg).sum()), int((pos == neg).sum())) == (row["strict"], row["ties"]) == (1, 3)


def test_a_designated_rankers_keys_follow_from_its_judgments_and_its_references_runs(tmp_path):
    """A ranker judged on its designated pair only has no run: the oracle rebuilds its keys from judgments.csv's
    rule scores and its reference's and tie-breaker's runs, and gets the suite's strict outcomes and ties."""
    rng = np.random.default_rng(3)
    rows, directions = [], []
    for i in range(60):
        for k, (pos, neg) in enumerate((("x", "y"), ("y", "x")), start=1):
            qid = f"P{i:02d}_q{k}"
            rows += [(qid, p, float(rng.integers(0, 3))) for p in ["x", "y", *[f"d{j:02d}" for j in range(24)]]]
            directions.append((qid, f"P{i:02d}", "test", pos, neg, f"g{i // 2}", False))
    pool = pd.DataFrame(rows, columns=["qid", "pid", "score"])
    d = annotate_population(pd.DataFrame(directions, columns=["qid", "pair_id", "split", "preferred_pid",
                                                              "counterpart_pid", "group", "conflict"]), pool)
    fusion = single_score_ranking(pool, pool["score"].to_numpy() + rng.random(len(pool)) // 0.5, "fusion")
    tie = single_score_ranking(pool, rng.integers(0, 2, len(pool)).astype(float), "e0")
    text = {(q, p): float(rng.integers(0, 3)) if rng.random() > 0.05 else math.nan
            for q, p in zip(d["qid"], d["preferred_pid"]) for p in (p, "y" if p == "x" else "x")}
    suite = designated_outcomes(fusion, text, d, tie_breaker=tie).set_index("qid")
    (tmp_path / "runs").mkdir()
    write_run(fusion, tmp_path / "runs" / "fusion.trec")
    write_run(tie, tmp_path / "runs" / "e0.trec")
    pd.DataFrame([("g", "pair", q, p, s) for (q, p), s in text.items()],
                 columns=["ranker", "scope", "qid", "pid", "rule_score"]).to_csv(tmp_path / "judgments.csv", index=False)
    keys_pos, keys_neg, qids = outside.designated(tmp_path, "g", {"reference": "fusion", "tie_breaker": "e0"},
                                                  d.set_index("qid"))
    strict = [a > b for a, b in zip(keys_pos, keys_neg)]
    assert strict == suite.loc[qids, "strict"].tolist()
    assert [a == b for a, b in zip(keys_pos, keys_neg)] == suite.loc[qids, "tie"].tolist()
    assert 0 < sum(strict) < len(strict) and suite["tie"].any() and suite["fallback"].any()


def test_oracle_on_a_realistic_random_study(tmp_path):
    """300 pairs, pools of 40-80 passages, coarse three-part keys (many exact ties), conflicts and uncovered pairs."""
    rng = np.random.default_rng(7)
    rows, directions = [], []
    for i in range(300):
        pair, group = f"P{i:03d}", f"G{rng.integers(0, 80):02d}"
        conflict = rng.random() < 0.05
        for k, (pos, neg) in enumerate((("x", "y"), ("y", "x")), start=1):
            qid = f"{pair}_q{k}"
            pool = ["x", "y", *[f"d{j:03d}" for j in rng.choice(200, int(rng.integers(38, 79)), replace=False)]]
            if rng.random() < 0.05:
                pool.remove("y")  # not jointly retrieved: not covered
            rows += [(qid, p, rng.integers(0, 2), rng.integers(0, 4), rng.integers(0, 3) / 2) for p in pool]
            directions.append((qid, pair, "test", pos, neg, group, conflict))
    frame = pd.DataFrame(rows, columns=["qid", "pid", "k0", "k1", "k2"])
    d = annotate_population(pd.DataFrame(directions, columns=["qid", "pair_id", "split", "preferred_pid",
                                                              "counterpart_pid", "group", "conflict"]),
                            frame[["qid", "pid"]])
    assert 450 < int(d["eligible"].sum()) < 600
    got = assert_oracle_agrees(rank_by_keys(frame, "random"), d, tmp_path)
    assert 0 < got["Success@1"].mean() < got["Success@10"].mean() < 1


def test_qrels_judge_the_designated_pair_of_each_eligible_direction(tmp_path):
    """The one convention of the published and the exported qrels.txt: the preferred passage 1, eligible only."""
    text = write_qrels(tied_directions(), tmp_path / "qrels.txt").read_text()
    assert text == "D1_q1 0 b 1\nD1_q2 0 c 1\nD2_q1 0 e 1\nD2_q2 0 a 1\n"  # D3 is a conflict: not judged


def test_ranx_agrees_with_the_oracle_when_made_comparable(tmp_path):
    ranx = pytest.importorskip("ranx", reason="ranx is not installed here (pip install ranx)")
    ranking = single_score_ranking(TIED, TIED["score"].to_numpy(), "fusion")
    read = outside.read_run(write_run(ranking, tmp_path / "run.trec"))  # the list order is the rank column
    run = ranx.Run({q: dict(zip(g["pid"], -g["rank"].astype(float))) for q, g in read.groupby("qid")})
    qrels = ranx.Qrels.from_file(str(write_qrels(tied_directions(), tmp_path / "qrels.txt")), kind="trec")
    # The run holds the conflict pair D3's queries, the qrels do not: ranx refuses unless made comparable.
    assert ranx.evaluate(qrels, run, "mrr", make_comparable=True) == pytest.approx((1 / 3 + 1 / 2 + 1 / 5 + 1) / 4)


def test_a_sampled_rankers_run_is_judged_on_the_queries_it_covers(tmp_path):
    """A sampled ranker's run and Table II row cover its sample only; ir_measures counts a judged query missing
    from the run as RR 0, so the read-back judges the run's own queries (as test_first_hour does)."""
    sample = TIED[TIED["qid"].str.startswith("D1")]
    ranking = single_score_ranking(sample, sample["score"].to_numpy(), "sampled")
    run = list(ir_measures.read_trec_run(str(write_run(ranking, tmp_path / "run.trec"))))
    qrels = list(ir_measures.read_trec_qrels(str(write_qrels(tied_directions(), tmp_path / "qrels.txt"))))
    everything = ir_measures.calc_aggregate([ir_measures.RR], qrels, run)[ir_measures.RR]
    covered = {r.query_id for r in run}
    own = ir_measures.calc_aggregate([ir_measures.RR], [q for q in qrels if q.query_id in covered], run)
    assert own[ir_measures.RR] == pytest.approx((1 / 3 + 1 / 2) / 2)  # D1_q1 at 3, D1_q2 at 2 (by hand above)
    assert everything == pytest.approx((1 / 3 + 1 / 2) / 4)  # D2's two judged queries count as 0
