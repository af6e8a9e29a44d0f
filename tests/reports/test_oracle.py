"""Independent oracle: MRR, Success@k and nDCG@10 from the exported TREC files, by ir_measures on pytrec_eval
(trec_eval's C code), equal the suite's own direction-level numbers."""
from __future__ import annotations

from pathlib import Path

import ir_measures
import numpy as np
import pandas as pd
import pytest

from fixtures.populations import annotate_population
from rankers.base import rank_by_keys, single_score_ranking
from rankers.trec import write_qrels, write_run
from reports.measures import summarize
from reports.outcomes import direction_outcomes

MEASURES = [ir_measures.RR, ir_measures.Success @ 1, ir_measures.Success @ 3, ir_measures.Success @ 10,
            ir_measures.nDCG @ 10]


def oracle(run: Path, qrels: Path) -> pd.DataFrame:
    """Per-query RR and Success@k computed by pytrec_eval from the files alone (qid-indexed, one column each)."""
    provider = ir_measures.pytrec_eval
    assert provider.is_available()
    metrics = provider.iter_calc(MEASURES, ir_measures.read_trec_qrels(str(qrels)), ir_measures.read_trec_run(str(run)))
    frame = pd.DataFrame([(m.query_id, str(m.measure), m.value) for m in metrics], columns=["qid", "measure", "value"])
    return frame.pivot(index="qid", columns="measure", values="value")


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


def test_raw_tied_scores_would_mislead_the_oracle(tmp_path):
    """Why the run file's score is pool_size - rank + 1: with the raw tied scores trec_eval re-breaks ties by
    document id descending, so D2_q1's preferred "e" would move from rank 5 to rank 1."""
    ranking = single_score_ranking(TIED, TIED["score"].to_numpy(), "fusion")
    raw = tmp_path / "raw.trec"
    f = ranking.frame
    raw.write_text("".join(f"{q} Q0 {p} {r} {s} raw\n" for q, p, r, s in zip(f["qid"], f["pid"], f["rank"], f["k0"])))
    got = oracle(raw, write_qrels(tied_directions(), tmp_path / "qrels.txt"))
    assert got.at["D2_q1", "RR"] == 1.0 and got.at["D2_q2", "RR"] == pytest.approx(1 / 5)


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
    run = ranx.Run.from_file(str(write_run(ranking, tmp_path / "run.trec")), kind="trec")
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
