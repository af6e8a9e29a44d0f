"""A foreign TREC run in the fixed pool: the placement rule and its counts by hand, file errors by line,
and the round trip of the suite's own exported fusion run."""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from rankers.base import single_score_ranking, strictly_greater
from rankers.fusion import fusion_ranking
from rankers.trec import TrecFileError, read_run, write_run
from rankers.trec_run import direction_coverage, trec_run_ranking

# Reference (fusion) order: q1 a b c d e; q2 f g; q3 h i.
REFERENCE = single_score_ranking(
    pd.DataFrame({"qid": ["q1"] * 5 + ["q2"] * 2 + ["q3"] * 2, "pid": list("abcdefghi")}),
    np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.9, 0.1, 0.6, 0.3]), "fusion")

RUN = """\
q1 Q0 d 1 5.0 sys
q1 Q0 b 2 5.0 sys
q1 Q0 zz 3 4.0 sys

q1 Q0 e 4 3.0 sys
q2 Q0 g 1 -1.0 sys
"""


def write(tmp_path, text, name="run.trec"):
    path = tmp_path / name
    path.write_text(text)
    return path


def keys_of(ranking):
    return ranking.frame.set_index(["qid", "pid"])[["k0", "k1", "k2"]]


def test_placement_rule_and_counts_by_hand(tmp_path):
    ranking, coverage = trec_run_ranking(write(tmp_path, RUN), REFERENCE, "theirs")
    order = ranking.frame.groupby("qid")["pid"].apply(list).to_dict()
    # q1: ranked d, b (score 5, tied; run rank puts d first), e (3); unranked a, c in fusion order; zz dropped.
    assert order == {"q1": ["d", "b", "e", "a", "c"], "q2": ["g", "f"], "q3": ["h", "i"]}
    keys = keys_of(ranking)
    assert keys.loc[("q1", "d")].tolist() == [1.0, 5.0, 0.0] and keys.loc[("q1", "e")].tolist() == [1.0, 3.0, 0.0]
    assert keys.loc[("q2", "g")].tolist() == [1.0, -1.0, 0.0]  # a negative run score still beats unranked
    assert (keys.loc[[("q1", "a"), ("q1", "c"), ("q2", "f"), ("q3", "h"), ("q3", "i")]] == 0.0).all(axis=None)

    def strict(x, y):
        return bool(strictly_greater(keys.loc[[x]].to_numpy(), keys.loc[[y]].to_numpy())[0])

    assert not strict(("q1", "d"), ("q1", "b")) and not strict(("q1", "b"), ("q1", "d"))  # equal run scores: tie
    assert strict(("q1", "e"), ("q1", "a")) and strict(("q2", "g"), ("q2", "f"))
    assert not strict(("q1", "a"), ("q1", "c")) and not strict(("q3", "h"), ("q3", "i"))  # unranked: tied

    assert coverage.per_query.to_dict("records") == [
        {"qid": "q1", "ranked_in_pool": 3, "unranked_in_pool": 2, "ranked_outside_pool": 1},
        {"qid": "q2", "ranked_in_pool": 1, "unranked_in_pool": 1, "ranked_outside_pool": 0},
        {"qid": "q3", "ranked_in_pool": 0, "unranked_in_pool": 2, "ranked_outside_pool": 0}]
    assert coverage.uncovered_qids == ("q3",) and coverage.extra_qids == ()
    assert ranking.info["ranked_outside_pool"] == 1 and ranking.info["uncovered_queries"] == 1
    assert ranking.info["unranked_in_pool"] == 5 and ranking.info["tags"] == ["sys"] and not ranking.fallback


def test_direction_coverage_and_ties_by_cause_by_hand(tmp_path):
    """q1 ranks d, b (both 5.0) and e; q2 ranks g; q3 nothing: six directions, one of each situation."""
    ranking, _ = trec_run_ranking(write(tmp_path, RUN), REFERENCE, "theirs")
    directions = pd.DataFrame([("q1", "d", "b"), ("q1", "e", "a"), ("q1", "a", "c"), ("q2", "f", "g"),
                               ("q3", "h", "i"), ("q1", "d", "e")],
                              columns=["qid", "preferred_pid", "counterpart_pid"])
    assert direction_coverage(ranking, directions) == {
        "directions": 6, "both_ranked": 2, "preferred_only_ranked": 1, "counterpart_only_ranked": 1,
        "neither_ranked": 2, "ties": 3, "ties_both_unranked": 2, "ties_equal_score": 1}
    with pytest.raises(ValueError, match="lacks a designated passage"):
        direction_coverage(ranking, pd.DataFrame([("q2", "f", "zz")], columns=list(directions.columns)))


def test_equal_score_and_rank_fall_back_to_pid_for_position_only(tmp_path):
    run = "q2 Q0 g 1 2.0 s\nq2 Q0 f 1 2.0 s\n"
    ranking, _ = trec_run_ranking(write(tmp_path, run), REFERENCE, "theirs")
    q2 = ranking.frame[ranking.frame["qid"] == "q2"]
    assert q2["pid"].tolist() == ["f", "g"] and q2["rank"].tolist() == [1, 2]
    assert (q2[["k0", "k1", "k2"]].to_numpy() == [[1.0, 2.0, 0.0]] * 2).all()


def test_extra_qids_are_an_error_unless_allowed(tmp_path):
    path = write(tmp_path, RUN + "q9 Q0 a 1 1.0 sys\nq8 Q0 a 1 1.0 sys\nq8 Q0 b 2 0.5 sys\n")
    with pytest.raises(TrecFileError, match=r"run\.trec: 2 run qids are not queries of the pool of 'fusion', "
                                           r"e\.g\. \['q8', 'q9'\]"):
        trec_run_ranking(path, REFERENCE, "theirs")
    ranking, coverage = trec_run_ranking(path, REFERENCE, "theirs", allow_extra_qids=True)
    assert coverage.extra_qids == ("q8", "q9") and coverage.n_extra_lines == 3
    assert coverage.extra_lines == {"q8": 2, "q9": 1}
    assert ranking.info["extra_qids"] == 2 and set(ranking.frame["qid"]) == {"q1", "q2", "q3"}


@pytest.mark.parametrize("text, words", [
    ("q1 Q0 a 1 1.0\n", r"run\.trec:1: expected 6 fields .* got 5"),
    ("q1 Q0 a 1 2 3 tag\n", r"run\.trec:1: expected 6 fields .* got 7"),  # shifted fields would all parse
    ("q1 Q0 a 1 2.0 s\nq1 Q0 b 2 1.0 s x\n", r"run\.trec:2: expected 6 fields .* got 7"),
    ("q1 Q0 a 1 1.0 s\n\nq1 Q0 b one 0.5 s\n", r"run\.trec:3: rank 'one' is not an integer"),
    ("q1 Q0 a 1 high s\n", r"run\.trec:1: score 'high' is not a number"),
    ("q1 Q0 a 1 nan s\n", r"run\.trec:1: score 'nan' is not finite"),
    ("q1 Q0 a 1 1.0 s\nq1 Q0 b 2 0.5 s\nq1 Q0 a 3 0.1 s\n",
     r"run\.trec:3: duplicate \(qid, pid\) \(q1, a\), first on line 1"),
    ("\n\n", r"run\.trec: no run lines"),
])
def test_malformed_files_name_file_and_line(tmp_path, text, words):
    with pytest.raises(TrecFileError, match=words):
        read_run(write(tmp_path, text))


def test_missing_file(tmp_path):
    with pytest.raises(TrecFileError, match="not found"):
        trec_run_ranking(tmp_path / "absent.trec", REFERENCE, "theirs")


# ----------------------------------------------------------------------------- the suite's own fusion run


def synthetic_pool(n_queries: int, size: int, seed: int) -> pd.DataFrame:
    """Random route scores over continuous ranges: fused scores are distinct almost surely."""
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(n_queries):
        for p in rng.choice(200, size=size, replace=False):
            rows.append((f"q{q:02d}", f"p{p:03d}", rng.uniform(0.3, 1.0),
                         rng.uniform(0.0, 2.0) if rng.random() < 0.6 else np.nan,
                         rng.uniform(0.0, 9.0) if rng.random() < 0.7 else np.nan))
    frame = pd.DataFrame(rows, columns=["qid", "pid", "dense_score", "sparse_score", "bm25_score"])
    for route in ("dense", "sparse", "bm25"):
        frame[f"{route}_rank"] = frame.groupby("qid")[f"{route}_score"].rank(ascending=False, method="first")
    return frame


def all_ordered_pairs(ranking) -> tuple[np.ndarray, np.ndarray, list[tuple[str, str, str]]]:
    """Keys of every ordered (preferred, counterpart) pair of passages within each query."""
    keys = keys_of(ranking)
    a, b, names = [], [], []
    for qid, group in ranking.frame.groupby("qid"):
        for x, y in itertools.permutations(sorted(group["pid"]), 2):
            a.append(keys.loc[(qid, x)].to_numpy())
            b.append(keys.loc[(qid, y)].to_numpy())
            names.append((qid, x, y))
    return np.array(a), np.array(b), names


def test_exported_fusion_run_reads_back_with_fusions_positions_and_strict_outcomes(tmp_path):
    pool = synthetic_pool(6, 12, seed=5)
    fusion = fusion_ranking(pool)
    fa, fb, names = all_ordered_pairs(fusion)
    assert not ((fa == fb).all(axis=1)).any()  # precondition: no tied pair anywhere in fusion
    ranking, coverage = trec_run_ranking(write_run(fusion, tmp_path / "runs" / "fusion.trec"), fusion, "fusion_run")
    merged = fusion.frame.merge(ranking.frame, on=["qid", "pid"], suffixes=("_f", "_r"))
    assert len(merged) == len(pool) and (merged["rank_f"] == merged["rank_r"]).all()
    ra, rb, names_r = all_ordered_pairs(ranking)
    assert names_r == names
    np.testing.assert_array_equal(strictly_greater(ra, rb), strictly_greater(fa, fb))
    assert coverage.totals() == {"pool_queries": 6, "pool_passages": len(pool), "ranked_in_pool": len(pool),
                                 "unranked_in_pool": 0, "ranked_outside_pool": 0, "uncovered_queries": 0,
                                 "extra_qids": 0, "extra_qid_lines": 0}


def test_fusion_ties_stay_ties_in_an_exported_run(tmp_path):
    # b and c have identical route scores: fusion ties them (strict fails both ways); the export writes fusion's own
    # scores, so read back they tie again, in the same positions (b first: passage id ascending).
    pool = synthetic_pool(1, 4, seed=1)
    pool.loc[:, "pid"] = ["a", "b", "c", "d"]
    routes = ["dense_score", "sparse_score", "bm25_score"]
    pool.loc[2, routes] = pool.loc[1, routes]
    fusion = fusion_ranking(pool)
    ranking, _ = trec_run_ranking(write_run(fusion, tmp_path / "fusion.trec"), fusion, "fusion_run")
    f, r = keys_of(fusion), keys_of(ranking)
    b, c = ("q00", "b"), ("q00", "c")
    assert (f.loc[b] == f.loc[c]).all()
    assert not strictly_greater(f.loc[[b]].to_numpy(), f.loc[[c]].to_numpy())[0]
    assert not strictly_greater(r.loc[[b]].to_numpy(), r.loc[[c]].to_numpy())[0]
    assert not strictly_greater(r.loc[[c]].to_numpy(), r.loc[[b]].to_numpy())[0]
    assert ranking.frame["pid"].tolist() == fusion.frame["pid"].tolist()
