"""TREC qrels/run round trip: a run carries the ranker's score keys (ties stay ties) and its list positions, so the
files alone reproduce strict preference, ties and MRR even when fusion scores tie."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rankers.base import Ranking, rank_by_keys, single_score_ranking
from reports.measures import summarize
from reports.outcomes import direction_outcomes
from fixtures.populations import annotate_population
from rankers.trec import TrecFileError, read_qrels, read_run, write_qrels, write_run
from reports.trec import mrr_from_files

#: Pool with tied fusion scores. Q1_q1: pa and pb tie at .5 under pc (.9): positions pc, pa, pb (id ascending).
POOL = pd.DataFrame({
    "qid": ["Q1_q1"] * 3 + ["Q1_q2"] * 3 + ["Q2_q1"] * 2 + ["Q2_q2"] * 2,
    "pid": ["pa", "pb", "pc", "pa", "pb", "pc", "pd", "pe", "pd", "pe"],
    "score": [0.5, 0.5, 0.9, 0.2, 0.7, 0.7, 0.3, 0.3, 0.1, 0.8],
})


def directions() -> pd.DataFrame:
    d = pd.DataFrame({
        "qid": ["Q1_q1", "Q1_q2", "Q2_q1", "Q2_q2", "Q3_q1"],
        "pair_id": ["Q1", "Q1", "Q2", "Q2", "Q3"],
        "split": "test",
        "preferred_pid": ["pa", "pb", "pd", "pe", "pz"],
        "counterpart_pid": ["pb", "pa", "pe", "pd", "py"],
        "group": ["g1", "g1", "g2", "g2", "g3"],
        "conflict": False,
    })
    return annotate_population(d, POOL)


def fusion():
    return single_score_ranking(POOL, POOL["score"].to_numpy(), "fusion")


def test_run_file_content_carries_the_rankers_scores_and_its_ties(tmp_path):
    path = write_run(fusion(), tmp_path / "runs" / "fusion.trec")
    lines = path.read_text().splitlines()
    assert lines[:3] == ["Q1_q1 Q0 pc 1 0.9 fusion", "Q1_q1 Q0 pa 2 0.5 fusion", "Q1_q1 Q0 pb 3 0.5 fusion"]
    run = read_run(path)
    assert len(run) == len(POOL)
    assert (run.groupby("qid")["score"].diff().dropna() <= 0).all()  # ranks follow scores; equal scores are ties
    merged = run.merge(POOL, on=["qid", "pid"])
    assert (merged["score_x"] == merged["score_y"]).all()  # the ranker's own scores, exactly


def test_a_multi_key_rankers_scores_are_its_keys_dense_ranks(tmp_path):
    """A window ranker's key (1, text score, tie-breaker) over the tail's (0, 0, reference): one score per distinct
    key, in the keys' order, equal keys equal, so strict preference and ties read from the file are the ranker's."""
    frame = pd.DataFrame({"qid": ["q"] * 5, "pid": ["a", "b", "c", "d", "e"], "k0": [1.0, 1.0, 1.0, 0.0, 0.0],
                          "k1": [3.0, 3.0, 1.0, 0.0, 0.0], "k2": [0.7, 0.7, 0.9, 0.4, 0.2]})
    run = read_run(write_run(rank_by_keys(frame, "window"), tmp_path / "w.trec")).set_index("pid")
    assert run["score"].to_dict() == {"a": 4.0, "b": 4.0, "c": 3.0, "d": 2.0, "e": 1.0}
    assert run["rank"].to_dict() == {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5}


def test_qrels_one_line_per_eligible_direction(tmp_path):
    path = write_qrels(directions(), tmp_path / "qrels.txt")
    assert path.read_text().splitlines() == ["Q1_q1 0 pa 1", "Q1_q2 0 pb 1", "Q2_q1 0 pd 1", "Q2_q2 0 pe 1"]
    assert read_qrels(path)["relevance"].tolist() == [1, 1, 1, 1]


def test_mrr_from_files_equals_measures_with_tied_scores(tmp_path):
    d = directions()
    ranking = fusion()
    row = summarize(direction_outcomes(ranking, d), d)
    # By hand: Q1_q1 pa at 2; Q1_q2 pb ties pc at .7, pb first by id -> 1; Q2_q1 pd ties pe -> 1; Q2_q2 pe -> 1.
    assert row["mrr"] == pytest.approx((1 / 2 + 1 + 1 + 1) / 4)
    run, qrels = write_run(ranking, tmp_path / "fusion.trec"), write_qrels(d, tmp_path / "qrels.txt")
    assert mrr_from_files(run, qrels) == pytest.approx(row["mrr"])


def test_positions_come_from_the_rank_column_which_must_follow_the_scores(tmp_path):
    """Equal scores are ties: their order is the ranker's, in the rank column (a re-sort by score could not recover
    it); a rank column that contradicts the scores is refused, naming the file and query."""
    qrels = write_qrels(directions(), tmp_path / "qrels.txt")
    other = tmp_path / "other.trec"  # the same tied scores, ties in the other order: another list, another MRR
    f = fusion().frame.merge(POOL, on=["qid", "pid"]).sort_values(["qid", "score", "pid"], ascending=[True, False, False])
    f["rank"] = f.groupby("qid").cumcount() + 1
    other.write_text("".join(f"{q} Q0 {p} {r} {s} x\n" for q, p, r, s in zip(f["qid"], f["pid"], f["rank"], f["score"])))
    # Q1_q1: pb before pa -> 1/3; Q1_q2: pc before pb -> 1/2; Q2_q1: pe before pd -> 1/2; Q2_q2: 1.
    assert mrr_from_files(other, qrels) == pytest.approx((1 / 3 + 1 / 2 + 1 / 2 + 1) / 4)
    bad = tmp_path / "bad.trec"
    bad.write_text("Q1_q1 Q0 pa 1 0.2 x\nQ1_q1 Q0 pb 2 0.5 x\n")
    with pytest.raises(TrecFileError, match="bad.trec: qid Q1_q1: rank 2 scores above the rank before it"):
        mrr_from_files(bad, qrels)


def test_query_missing_from_run_counts_zero(tmp_path):
    qrels = write_qrels(directions(), tmp_path / "qrels.txt")
    run = tmp_path / "part.trec"
    run.write_text("Q1_q1 Q0 pa 1 2 x\nQ1_q1 Q0 pb 2 1 x\n")
    assert mrr_from_files(run, qrels) == pytest.approx(0.25)


def test_malformed_files_name_file_and_line(tmp_path):
    bad = tmp_path / "bad.trec"
    bad.write_text("Q1 Q0 pa 1 2 x\nQ1 Q0 pb 2\n")
    with pytest.raises(ValueError, match=r"bad.trec:2: expected 6 fields"):
        read_run(bad)
    bad.write_text("Q1 Q0 pa one 2 x\n")
    with pytest.raises(ValueError, match="bad.trec:1: rank 'one' is not an integer"):
        read_run(bad)
    with pytest.raises(TrecFileError, match="qrels file not found: .*nowhere"):
        read_qrels(tmp_path / "nowhere.txt")
    with pytest.raises(ValueError, match="whitespace"):
        write_run(fusion(), tmp_path / "x.trec", tag="two words")


def test_round_trip_reproduces_ranking(tmp_path):
    rng = np.random.default_rng(0)
    pool = pd.DataFrame({"qid": np.repeat([f"q{i}" for i in range(20)], 15),
                         "pid": np.tile([f"p{j:02d}" for j in range(15)], 20)})
    ranking = single_score_ranking(pool, rng.integers(0, 4, len(pool)).astype(float), "rnd")
    run = read_run(write_run(ranking, tmp_path / "rnd.trec"))
    back = run[["qid", "pid", "rank"]].reset_index(drop=True)
    ours = ranking.frame.sort_values(["qid", "rank"])[["qid", "pid", "rank"]].reset_index(drop=True)
    pd.testing.assert_frame_equal(back, ours, check_dtype=False)


def test_real_test_directions_end_to_end(tmp_path):
    """Real Test qids and passage ids, synthetic pool of 12 candidates with coarse (often tied) fusion scores."""
    from fixtures.study import build_study

    study = build_study()
    d = study.split("test")
    corpus = sorted(study.corpus_for("test"))
    rng = np.random.default_rng(4)
    background = np.array(corpus)[rng.integers(0, len(corpus), (len(d), 10))]
    rows = pd.DataFrame({"qid": np.repeat(d["qid"].to_numpy(), 12),
                         "pid": np.column_stack([d["preferred_pid"], d["counterpart_pid"], background]).ravel()})
    pool = rows.drop_duplicates(["qid", "pid"]).reset_index(drop=True)
    pool = pool[~pool["qid"].isin(d["qid"].iloc[:5]) | (pool["pid"] != pool["qid"].map(d.set_index("qid")["counterpart_pid"]))]
    a = annotate_population(d, pool)
    assert a["eligible"].sum() == 2766 - 5 - 2  # 5 uncovered, 2 conflicts
    ranking = single_score_ranking(pool, rng.integers(0, 5, len(pool)).astype(float), "fusion")
    row = summarize(direction_outcomes(ranking, a), a)
    run, qrels = write_run(ranking, tmp_path / "fusion.trec"), write_qrels(a, tmp_path / "qrels.txt")
    assert row["n"] == len(read_qrels(qrels)) == 2759
    assert mrr_from_files(run, qrels) == pytest.approx(row["mrr"])
    assert row["ties"] > 0


def test_a_route_run_keeps_the_routes_own_scores_as_python_prints_them(tmp_path):
    frame = pd.DataFrame({"qid": ["Q1_q1", "Q1_q1", "Q2_q1"], "pid": ["pb", "pa", "pd"], "rank": [1, 2, 1],
                          "k0": [0.1 + 0.2, 12.0, -1e-20], "k1": 0.0, "k2": 0.0})
    path = write_run(Ranking("bm25", frame), tmp_path / "runs" / "bm25.trec", own_scores=True)
    assert path.read_text(encoding="utf-8") == ("Q1_q1 Q0 pb 1 0.30000000000000004 bm25\n"
                                                "Q1_q1 Q0 pa 2 12.0 bm25\nQ2_q1 Q0 pd 1 -1e-20 bm25\n")
    assert read_run(path)["score"].tolist() == [0.1 + 0.2, 12.0, -1e-20]


def test_a_stashed_run_is_named_by_its_keys_and_the_writers_code(tmp_path):
    """Two rankings in the same order with other scores are two files: a run the cache holds from other keys (or
    another version of the writer) is never published for this one."""
    from reports.outputs import stash_run

    other = single_score_ranking(POOL, POOL["score"].to_numpy() * 2, "fusion")
    assert other.frame["rank"].tolist() == fusion().frame["rank"].tolist()
    first, second = stash_run(tmp_path, fusion()), stash_run(tmp_path, other)
    assert first != second and stash_run(tmp_path, fusion()) == first
    assert "1.8" in second.read_text() and "1.8" not in first.read_text()
