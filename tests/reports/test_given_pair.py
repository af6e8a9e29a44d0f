"""Given-pair paired accuracy under both tie rules, as nevir_paired.csv's row, and the table beside the published
figures, by hand; the rule named after MTEB checked against mteb's own NevIR evaluator on the same two-passage runs."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fixtures.populations import annotate_population
from fixtures.samples import sampling_units
from fixtures.reference import PublishedResult
from reports.measures import NEVIR_PAIRED_COLUMNS, nevir_paired_row
from reports.pairs import given_pair_paired, pair_population, pair_unit
from reports.reference import COLUMNS, beside_published
from reports.tables import pair_only_outcomes


def directions() -> pd.DataFrame:
    """Complete pairs P1, P2 (group g1), P3 (g2); Q1 (g3) has one eligible direction (its q2 is a conflict)."""
    rows = [(f"{p}_q{k}", p, k, "test", f"{p}a" if k == 1 else f"{p}b", f"{p}b" if k == 1 else f"{p}a", g, False)
            for p, g in (("P1", "g1"), ("P2", "g1"), ("P3", "g2"), ("Q1", "g3")) for k in (1, 2)]
    d = pd.DataFrame(rows, columns=["qid", "pair_id", "direction", "split", "preferred_pid", "counterpart_pid",
                                    "group", "conflict"])
    d["conflict"] = d["qid"] == "Q1_q2"
    pool = pd.DataFrame({"qid": np.repeat(d["qid"], 2), "pid": np.ravel(d[["preferred_pid", "counterpart_pid"]])})
    return annotate_population(d, pool)


#: Eligible directions in order P1_q1, P1_q2, P2_q1, P2_q2, P3_q1, P3_q2, Q1_q1 (scores of preferred, counterpart).
#: P1: both right. P2: q1 right, q2 tied. P3: both tied. Q1: incomplete (never counted).
POS = [0.9, 0.8, 0.7, 0.5, 0.4, 0.3, 0.1]
NEG = [0.1, 0.2, 0.3, 0.5, 0.4, 0.3, 0.9]


def outcomes(d: pd.DataFrame, pos=POS, neg=NEG) -> pd.DataFrame:
    return pair_only_outcomes(d, np.array(pos + [np.nan]), np.array(neg + [np.nan]))


def test_both_tie_rules_by_hand():
    d = directions()
    row = nevir_paired_row("ce", given_pair_paired(outcomes(d), d))
    assert tuple(row) == NEVIR_PAIRED_COLUMNS
    # Ties fail: only P1 counts, 1 of 3 complete pairs. By passage id, descending (trec_eval): P2_q2's preferred P2b
    # sorts after P2a, so P2 counts; P3 ties both ways and the same passage (P3b) comes first for both: P3 fails.
    assert (row["pairs"], row["paired"], row["tied_pairs"]) == (3, 1, 2)
    assert row["paired_pct"] == pytest.approx(100 / 3)
    assert row["paired_trec_pct"] == pytest.approx(200 / 3)
    # Two groups resampled: (g1,g1) -> P1,P2 twice; (g2,g2) -> P3 twice; (g1,g2) mixed.
    # Ties fail: 1/2, 0, 1/3 -> interval [0, 50]. By id: 1, 0, 2/3 -> [0, 100].
    assert (row["paired_lo"], row["paired_hi"]) == pytest.approx((0.0, 50.0))
    assert (row["paired_trec_lo"], row["paired_trec_hi"]) == pytest.approx((0.0, 100.0))


def test_unavailable_scores_fail_under_both_rules():
    d = directions()
    pos = list(POS)
    pos[0] = float("nan")  # P1_q1 unavailable: P1 no longer right under either rule
    row = nevir_paired_row("ce", given_pair_paired(outcomes(d, pos=pos), d))
    assert (row["paired"], row["paired_trec_pct"]) == (0, pytest.approx(100 / 3))


def test_qids_outside_the_population_are_an_error():
    d = directions()
    frame = outcomes(d)
    frame.loc[0, "qid"] = "X_q1"
    with pytest.raises(ValueError, match=r"outside the eligible directions, e.g. \['X_q1'\]"):
        given_pair_paired(frame, d)


def test_run_rows_then_published_rows_with_their_sources():
    d = directions()
    row = nevir_paired_row("grader_pairs", given_pair_paired(outcomes(d), d))
    published = (PublishedResult("Rank1-7B", 65.1, "NevIR Test; given pair", "Rank1, arXiv 2502.18418", "Table 2"),)
    table = beside_published(pd.DataFrame([row]), {"grader_pairs": "LLM grader"}, "test", published)
    assert list(table.columns) == list(COLUMNS)
    ours, theirs = table.to_dict("records")
    assert ours["system"] == "LLM grader" and ours["pairs"] == "3" and ours["published"] == "--"
    assert ours["ties fail (this suite) [95% CI]"].startswith("33.3 [0.0, 50.0]")
    assert "interval unreliable" in ours["ties fail (this suite) [95% CI]"]  # 3 pairs: fewer than 20
    assert ours["ties by passage id, descending (trec_eval; MTEB's NevIR task) [95% CI]"].startswith("66.7 [0.0, 100.0]")
    assert theirs["published"] == "65.1" and "arXiv 2502.18418, Table 2" in theirs["source"]
    assert theirs["ties fail (this suite) [95% CI]"] == "--"


def test_no_complete_pair_gives_counts_of_zero_and_no_rate():
    d = directions()
    q1 = outcomes(d).query("qid == 'Q1_q1'")  # Q1's other direction is a conflict: Q1 is not a complete pair
    row = nevir_paired_row("ce", given_pair_paired(q1, d))
    assert (row["pairs"], row["paired"], row["tied_pairs"]) == (0, 0, 0)
    assert all(np.isnan(row[c]) for c in NEVIR_PAIRED_COLUMNS[1:] if c not in ("pairs", "paired", "tied_pairs"))


def test_a_sample_of_single_directions_counts_only_the_pairs_it_holds_whole() -> None:
    """A sample of single directions (each its own unit, ``source_group`` kept) may hold one direction of a complete
    pair: that pair is not a pair of the sample (neither right nor wrong), and the pairs it holds whole resample with
    their source groups."""
    directions = pd.DataFrame({
        "qid": ["a1", "a2", "b1", "c1", "c2"], "pair_id": ["A", "A", "B", "C", "C"], "split": "test",
        "complete": True, "eligible": True, "group": ["a1", "a2", "b1", "c1", "c2"],
        "source_group": ["g1", "g1", "g2", "g3", "g3"], "preferred_pid": "x", "counterpart_pid": "y"})
    strict = np.array([True, True, True, True, False])
    pairs = pair_population(directions, strict, "group")
    assert pairs.index.get_level_values("pair_id").tolist() == ["A", "C"]  # B's other direction was not drawn
    assert pairs["group"].tolist() == ["g1", "g3"] and pairs["both"].tolist() == [1.0, 0.0]
    outcomes = pd.DataFrame({"qid": directions["qid"], "strict": strict, "tie": False})
    result = given_pair_paired(outcomes, directions, n_resamples=200)
    assert (result.pairs, result.paired) == (2, 1)


def test_a_pair_resamples_with_the_unit_that_holds_it_whole() -> None:
    """On whole source groups and on complete pairs a pair lies in one unit and resamples with it; on single
    directions its two directions are two units, so it resamples with its source group."""
    d = directions()
    for design, unit in (("groups", "group"), ("pairs", "group"), ("directions", "source_group")):
        units = sampling_units(d, design)
        assert pair_unit(units, "group") == unit, design
        pairs = pair_population(units, np.ones(len(units), dtype=bool), "group")
        expected = {"groups": ["g1", "g1", "g2"], "pairs": ["P1", "P2", "P3"], "directions": ["g1", "g1", "g2"]}
        assert pairs["group"].tolist() == expected[design], design


def test_the_trec_rule_is_mtebs_own_nevir_evaluator() -> None:
    """MTEB's NevIR task (mteb.tasks.reranking.eng.nev_ir) scores each query's two passages with pytrec_eval's
    recall@1 and counts a pair when both queries get theirs first; on the same two-passage runs, with coarse scores that
    tie often and passage ids in no order, it gives exactly the ``trec`` rule's paired accuracy."""
    from mteb._evaluators.retrieval_metrics import calculate_retrieval_scores
    from mteb.tasks.reranking.eng.nev_ir import NevIR

    rng = np.random.default_rng(17)
    rows, scores = [], {}
    for i in range(300):
        ids = [f"{rng.integers(16 ** 6):06x}", f"{rng.integers(16 ** 6):06x}"]  # the pair's two passages
        for k in (1, 2):
            preferred, counterpart = ids if k == 1 else ids[::-1]
            qid = f"N{i:03d}_q{k}"
            rows.append((qid, f"N{i:03d}", k, "test", preferred, counterpart, f"g{i // 3}", False))
            scores[qid] = {preferred: float(rng.integers(0, 3)), counterpart: float(rng.integers(0, 3))}
    d = pd.DataFrame(rows, columns=["qid", "pair_id", "direction", "split", "preferred_pid", "counterpart_pid", "group",
                                    "conflict"])
    d = annotate_population(d, pd.DataFrame([(q, p) for q, s in scores.items() for p in s], columns=["qid", "pid"]))
    pos = pd.Series({q: scores[q][p] for q, p in zip(d["qid"], d["preferred_pid"])})
    neg = pd.Series({q: scores[q][p] for q, p in zip(d["qid"], d["counterpart_pid"])})
    row = nevir_paired_row("scorer", given_pair_paired(pair_only_outcomes(d, pos, neg), d, n_resamples=10))
    qrels = {q: {p: 1} for q, p in zip(d["qid"], d["preferred_pid"])}
    evaluated = calculate_retrieval_scores(scores, qrels, k_values=[1])
    mteb = NevIR().task_specific_scores(evaluated.all_scores, qrels, scores, "test", "default")["paired_accuracy"]
    assert row["tied_pairs"] > 100 and row["paired_pct"] < row["paired_trec_pct"]  # the rules differ on many pairs
    assert row["paired_trec_pct"] == pytest.approx(100 * mteb, abs=1e-9)
