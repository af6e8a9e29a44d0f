"""E0 and background N (N=8, and any N): loss rows, labels, sampling, weights, stopping, caching, integrity, determinism."""
from __future__ import annotations

import json
import os
import pickle
import re
import subprocess
import sys
import warnings
from collections import Counter
from pathlib import Path

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
from scipy.stats import chisquare

from rankers.features import pool_features
from rankers.lambdamart import MAX_ROUNDS, train_ranker
from rankers.lambdamart_rows import (background_seed, sample_background, source_weights, strict_by_groups, training_set,
                                     variant_name)

SPLIT_OF = {"trn": "train", "dev": "development"}
N = 8  # the paper's background training


def make_split(prefix: str, n_queries: int, n_background: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame, dict, dict]:
    """A tiny split: pool, directions, queries, corpus; half the queries are negated, like NevIR's pairs.

    The preferred passage usually matches the query's polarity and usually gets a slightly
    higher dense score, so a ranker has something, but not everything, to learn.
    """
    rng = np.random.default_rng(seed)
    corpus, queries, rows, dirs = {}, {}, [], []
    for i in range(n_queries):
        qid, negated = f"{prefix}-{i}_q1", i % 2 == 0
        queries[qid] = f"which topic{i % 7} event did {'not ' if negated else ''}happen in town{i}"
        pos, neg = f"{prefix}{i}p", f"{prefix}{i}n"
        pos_negated = negated == (rng.random() < 0.75)  # the preferred passage matches the query's polarity 75% of the time
        corpus[pos] = f"in town{i} the topic{i % 7} event did {'not ' if pos_negated else ''}happen last year"
        corpus[neg] = f"in town{i} the topic{i % 7} event did {'' if pos_negated else 'not '}happen last year"
        bg = [f"{prefix}{i}b{j}" for j in range(n_background)]
        for j, b in enumerate(bg):
            corpus[b] = f"filler {j} about topic{(i + j) % 7} and town{(i * j) % 11} never seen"
        pids = [pos, neg, *bg]
        dense = rng.uniform(0.2, 0.9, len(pids))
        dense[0] = dense[1] + (0.05 if rng.random() < 0.7 else -0.05)
        bm25 = rng.uniform(0.0, 8.0, len(pids))
        frame = pd.DataFrame({"qid": qid, "pid": pids, "dense_score": dense, "sparse_score": np.nan, "bm25_score": bm25})
        rows.append(frame)
        dirs.append({"qid": qid, "pair_id": f"{prefix}-{i}", "split": SPLIT_OF[prefix], "preferred_pid": pos,
                     "counterpart_pid": neg, "group": f"{prefix}g{i % 5}", "conflict": False, "corpus": "tv"})
    pool = pd.concat(rows, ignore_index=True)
    for route in ("dense", "sparse", "bm25"):
        pool[f"{route}_rank"] = pool.groupby("qid")[f"{route}_score"].rank(ascending=False, method="first")
    pool = pool[["qid", "pid", "dense_score", "dense_rank", "sparse_score", "sparse_rank", "bm25_score", "bm25_rank"]]
    return pool.sort_values(["qid", "pid"]).reset_index(drop=True), pd.DataFrame(dirs), queries, corpus


@pytest.fixture(scope="module")
def data():
    tp, td, tq, tc = make_split("trn", 60, 12, 1)
    dp, dd, dq, dc = make_split("dev", 30, 12, 2)
    return {"train_pool": tp, "train_directions": td, "dev_pool": dp, "dev_directions": dd,
            "queries": {**tq, **dq}, "corpora": {"tv": {**tc, **dc}}}


def train(n_background: int, data, cache_dir: Path, **over):
    args = {**data, **over}
    return train_ranker(n_background, args["train_pool"], args["train_directions"], args["dev_pool"], args["dev_directions"],
                        args["queries"], args["corpora"], cache_dir, seed=over.get("seed", 13))


def features_of(data):
    return pool_features(data["train_pool"], data["queries"], data["corpora"]["tv"])


def test_e0_loss_rows_are_only_the_designated_pair_with_full_pool_features(data):
    pool, d = data["train_pool"], data["train_directions"]
    x = features_of(data)
    ts = training_set(0, pool, x, d, seed=13)
    assert len(ts.labels) == 2 * len(d) and (ts.group_sizes == 2).all()
    by_row = pd.DataFrame({"qid": ts.qids, "pid": ts.pids, "label": ts.labels})
    pos = dict(zip(d["qid"], d["preferred_pid"]))
    assert all((row.label == 1) == (row.pid == pos[row.qid]) for row in by_row.itertuples())
    assert set(by_row["pid"]) == set(d["preferred_pid"]) | set(d["counterpart_pid"])  # no background row
    row = pool.index[(pool["qid"] == ts.qids[0]) & (pool["pid"] == ts.pids[0])][0]
    np.testing.assert_array_equal(ts.features[0], x[row])
    # the background shaped it: features of the pair alone differ (e.g. fusion rank, min-max)
    pair_only = pool[(pool["qid"] == ts.qids[0]) & pool["pid"].isin(ts.pids[:2])]
    assert not np.array_equal(pool_features(pair_only, data["queries"], data["corpora"]["tv"])[0], x[row])


def test_ineligible_directions_never_enter_the_loss(data):
    pool, d = data["train_pool"], data["train_directions"].copy()
    missing_q, conflict_q = d.at[0, "qid"], d.at[1, "qid"]
    pool = pool[~((pool["qid"] == missing_q) & (pool["pid"] == d.at[0, "counterpart_pid"]))].reset_index(drop=True)
    d.loc[1, "conflict"] = True
    ts = training_set(N, pool, pool_features(pool, data["queries"], data["corpora"]["tv"]), d, seed=13)
    assert missing_q not in set(ts.qids) and conflict_q not in set(ts.qids)
    assert len(ts.group_sizes) == len(d) - 2


def test_bg8_labels_and_sampling(data):
    pool, d = data["train_pool"], data["train_directions"]
    ts = training_set(N, pool, features_of(data), d, seed=13)
    frame = pd.DataFrame({"qid": ts.qids, "pid": ts.pids, "label": ts.labels})
    for qid, rows in frame.groupby("qid"):
        assert sorted(rows["label"]) == [0.0] * N + [1.0, 2.0]
        direction = d.set_index("qid").loc[qid]
        bg = ts.background[qid]["pids"]
        assert len(set(bg)) == N  # without replacement
        assert not {direction["preferred_pid"], direction["counterpart_pid"]} & set(bg)
        assert set(bg) <= set(pool.loc[pool["qid"] == qid, "pid"])
        assert ts.background[qid]["seed"] == background_seed(13, qid)
    shuffled = pool.sample(frac=1.0, random_state=3).reset_index(drop=True)
    again = training_set(N, shuffled, pool_features(shuffled, data["queries"], data["corpora"]["tv"]), d, seed=13)
    assert again.background == ts.background  # deterministic, independent of pool row order
    other = training_set(N, pool, features_of(data), d, seed=14)
    assert other.background != ts.background


def _one_query(pids: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    pool = pd.DataFrame({"qid": "q1", "pid": pids})
    directions = pd.DataFrame({"qid": ["q1"], "preferred_pid": [pids[0]], "counterpart_pid": [pids[1]]})
    return pool, directions


def test_a_tail_passage_changes_the_background_sample_only_if_it_would_be_drawn():
    """Another machine's pool may differ by one passage at a route's depth: the other draws stay as they were."""
    pids = [f"p{i:03d}" for i in range(150)]
    pool, d = _one_query(pids)
    base = sample_background(pool, d, 13, N)["q1"]["pids"]
    for gone in (p for p in pids[2:] if p not in base):
        assert sample_background(pool[pool["pid"] != gone], d, 13, N)["q1"]["pids"] == base
    extra = sample_background(pd.concat([pool, pd.DataFrame({"qid": ["q1"], "pid": ["new"]})]), d, 13, N)["q1"]["pids"]
    assert len(set(extra) - set(base)) <= 1


def test_background_draws_are_uniform_without_replacement():
    """Over many query seeds each of 20 candidates is drawn with probability 8/20 (chi-square at 0.001)."""
    pids = [f"p{i:02d}" for i in range(22)]
    counts = Counter()
    for s in range(3000):
        pool, d = _one_query(pids)
        drawn = sample_background(pool, d, s, N)["q1"]["pids"]
        assert len(set(drawn)) == N
        counts.update(drawn)
    observed = np.array([counts[p] for p in pids[2:]])
    assert observed.sum() == 3000 * N
    assert chisquare(observed).pvalue > 0.001


def test_any_background_count_trains_with_exactly_that_many(data, tmp_path):
    """``background = 4`` is its own variant (bg4): four sampled rows per query, its own cache folder."""
    pool, d = data["train_pool"], data["train_directions"]
    ts = training_set(4, pool, features_of(data), d, seed=13)
    assert all(len(b["pids"]) == 4 for b in ts.background.values()) and (ts.group_sizes == 6).all()
    assert all(len(set(b["pids"])) == 4 for b in ts.background.values())  # without replacement
    r = train(4, data, tmp_path)
    assert r.path.name.startswith("bg4-") and r.manifest["variant"] == "bg4" and r.manifest["n_background"] == 4
    assert r.manifest["label_counts"] == {"0": 60 * 4, "1": 60, "2": 60}
    assert r.path != train(N, data, tmp_path).path


@pytest.mark.parametrize("bad", [-1, True, 2.5, "8"])
def test_a_background_that_is_not_a_count_is_refused(bad):
    with pytest.raises(ValueError, match="background must be an integer >= 0"):
        variant_name(bad)


def test_bg8_takes_all_background_when_fewer_than_eight(data):
    pool, d = data["train_pool"], data["train_directions"]
    qid = d.at[0, "qid"]
    keep = set(d.loc[0, ["preferred_pid", "counterpart_pid"]]) | {f"trn0b{j}" for j in range(5)}
    small = pool[(pool["qid"] != qid) | pool["pid"].isin(keep)].reset_index(drop=True)
    ts = training_set(N, small, pool_features(small, data["queries"], data["corpora"]["tv"]), d, seed=13)
    assert sorted(ts.background[qid]["pids"]) == [f"trn0b{j}" for j in range(5)]
    assert ts.group_sizes[list(dict.fromkeys(ts.qids)).index(qid)] == 7


def test_source_weights_balance_groups():
    w = source_weights(pd.Series(["A", "A", "A", "B"]))
    assert w.tolist() == pytest.approx([2 / 3, 2 / 3, 2 / 3, 2.0])
    assert w[:3].sum() == pytest.approx(w[3:].sum()) and w.mean() == pytest.approx(1.0)


def test_training_rows_carry_their_query_weight(data):
    pool, d = data["train_pool"], data["train_directions"].copy()
    d["group"] = np.where(np.arange(len(d)) < 6, "big", "small")  # 6 queries vs 54 queries
    ts = training_set(N, pool, features_of(data), d, seed=13)
    w = pd.Series(ts.weights, index=ts.qids)
    big = w[w.index.isin(d["qid"][:6])]
    assert big.nunique() == 1 and big.iloc[0] == pytest.approx(60 / (2 * 6))
    per_query = w.groupby(level=0).first()
    totals = per_query.groupby(d.set_index("qid")["group"]).sum()
    assert totals["big"] == pytest.approx(totals["small"])


def test_strict_by_groups_ties_fail_and_groups_average_first():
    got = strict_by_groups(np.array([2.0, 1.0, 1.0, 3.0]), np.array([1.0, 1.0, 2.0, 0.0]), np.array(["g", "g", "g", "h"]))
    assert got == pytest.approx((1 / 3 + 1.0) / 2)


def test_e0_trains_stops_on_development_and_records_manifest(data, tmp_path):
    r = train(0, data, tmp_path)
    m = r.manifest
    assert 1 <= m["n_trees"] <= MAX_ROUNDS and r.booster.num_trees() == m["n_trees"]
    assert m["rounds_run"] <= MAX_ROUNDS and m["training_rows"] == 2 * m["training_queries"] == 120
    assert m["params"]["num_leaves"] == 7 and m["params"]["lambdarank_truncation_level"] == 2
    assert m["feature_names"][0] == "dense_score" and len(m["feature_names"]) == 38
    assert m["background"] == {} and m["label_counts"] == {"0": 60, "1": 60}
    # the saved model reproduces the development criterion it was selected on
    dev, dq = data["dev_pool"], data["dev_directions"]
    s = pd.Series(r.scores(dev, data["queries"], data["corpora"]["tv"]), index=pd.MultiIndex.from_frame(dev[["qid", "pid"]]))
    pos = s.loc[list(zip(dq["qid"], dq["preferred_pid"]))].to_numpy()
    neg = s.loc[list(zip(dq["qid"], dq["counterpart_pid"]))].to_numpy()
    assert strict_by_groups(pos, neg, dq["group"].to_numpy()) == pytest.approx(m["dev_strict_best"])
    assert m["dev_strict_best"] == max(m["dev_strict_curve"])
    ranking = r.rank(dev, data["queries"], data["corpora"]["tv"], "e0")
    assert len(ranking.frame) == len(dev) and ranking.info["n_trees"] == m["n_trees"]


def test_a_single_shared_corpus_is_accepted(data, tmp_path):
    by_name = train(0, data, tmp_path)
    shared = train(0, data, tmp_path, corpora=data["corpora"]["tv"])
    assert shared.path == by_name.path  # same inputs, same cached model


def test_bg8_manifest_records_sampled_background(data, tmp_path):
    r = train(N, data, tmp_path)
    m = r.manifest
    assert m["label_counts"] == {"0": 60 * N, "1": 60, "2": 60}
    assert set(m["background"]) == set(data["train_directions"]["qid"])
    assert all(len(b["pids"]) == N for b in m["background"].values())


@pytest.mark.parametrize("n_background", [0, N])
def test_two_trainings_give_identical_predictions(data, tmp_path, n_background):
    a = train(n_background, data, tmp_path / "a")
    b = train(n_background, data, tmp_path / "b")
    args = (data["dev_pool"], data["queries"], data["corpora"]["tv"])
    np.testing.assert_array_equal(a.scores(*args), b.scores(*args))
    assert a.manifest["n_trees"] == b.manifest["n_trees"]


def test_cached_model_is_reused_and_a_changed_input_retrains(data, tmp_path, monkeypatch):
    first = train(0, data, tmp_path)

    def refuse(*_a, **_k):
        raise AssertionError("retrained although the inputs are unchanged")

    monkeypatch.setattr(lgb, "train", refuse)
    again = train(0, data, tmp_path)
    assert again.path == first.path and again.manifest == first.manifest
    args = (data["dev_pool"], data["queries"], data["corpora"]["tv"])
    np.testing.assert_array_equal(again.scores(*args), first.scores(*args))
    with pytest.raises(AssertionError, match="retrained"):
        train(0, data, tmp_path, seed=99)


def test_no_usable_training_query_is_a_clear_error(data, tmp_path):
    conflicted = data["train_directions"].assign(conflict=True)
    with pytest.raises(ValueError, match="no usable training query"):
        train(0, data, tmp_path, train_directions=conflicted)


def test_non_finite_pool_value_is_named(data, tmp_path):
    bad = data["train_pool"].copy()
    bad.loc[3, "bm25_score"] = np.inf
    with pytest.raises(ValueError, match="feature 'bm25_score' is not finite"):
        train(0, data, tmp_path, train_pool=bad)


def test_single_candidate_pool_is_ranked(data, tmp_path):
    r = train(0, data, tmp_path)
    one = data["dev_pool"].iloc[[0]]
    ranking = r.rank(one, data["queries"], data["corpora"]["tv"], "e0")
    assert ranking.frame["rank"].tolist() == [1]


def _same_length_edit(path: Path, marker: str) -> bytes:
    """Change one digit right after ``marker``'s first decimal point (or its first digit): same length, new value."""
    text = path.read_text(encoding="utf-8")
    start = text.index(marker) + len(marker)
    dot = text.find(".", start)
    at = dot + 1 if 0 <= dot - start < 12 else next(i for i in range(start, len(text)) if text[i].isdigit())
    edited = text[:at] + str((int(text[at]) + 1) % 10) + text[at + 1:]
    assert len(edited) == len(text) and edited != text
    path.write_text(edited, encoding="utf-8")
    return edited.encode("utf-8")


@pytest.mark.parametrize("damage", ["model leaf value", "manifest seed", "seals missing"])
def test_an_altered_cached_ranker_is_named_and_retrained_to_identical_bytes(data, tmp_path, damage):
    first = train(0, data, tmp_path)
    model, manifest = first.path / "model.txt", first.path / "manifest.json"
    original = model.read_bytes()
    args = (data["dev_pool"], data["queries"], data["corpora"]["tv"])
    if damage == "model leaf value":
        edited = _same_length_edit(model, "leaf_value=")
        # the edit alone would change E0's scores without any error
        altered = lgb.Booster(model_str=edited.decode()).predict(pool_features(*args), num_threads=1)
        assert not np.array_equal(altered, first.scores(*args))
        named = model
    elif damage == "manifest seed":
        _same_length_edit(manifest, '"seed": ')
        named = manifest
    else:  # a ranker cached before seals existed
        for p in first.path.glob("*.sha256"):
            p.unlink()
        named = manifest
    with pytest.warns(UserWarning, match=f"{re.escape(str(named))}.*retraining") as caught:
        again = train(0, data, tmp_path)
    reason = "no digest was recorded" if damage == "seals missing" else "differs from the recorded"
    assert reason in str(caught[0].message)
    assert again.path == first.path and model.read_bytes() == original  # deterministic retraining
    assert again.manifest["seed"] == 13 and again.manifest["input_digests"] == first.manifest["input_digests"]
    np.testing.assert_array_equal(again.scores(*args), first.scores(*args))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # sealed again: the next run reuses it quietly
        assert train(0, data, tmp_path).manifest == again.manifest


_RETRAIN_IN_CHILD = """
import json, pickle, sys, warnings
from rankers.lambdamart import train_ranker
with open(sys.argv[1], "rb") as fh:
    d = pickle.load(fh)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    r = train_ranker(0, d["train_pool"], d["train_directions"], d["dev_pool"], d["dev_directions"], d["queries"],
                     d["corpora"], sys.argv[2], seed=13)
print(json.dumps({"n_trees": r.n_trees, "warnings": [str(w.message) for w in caught]}))
"""


def test_a_truncated_model_is_retrained_without_killing_the_interpreter(data, tmp_path):
    first = train(0, data, tmp_path / "models")
    model = first.path / "model.txt"
    original = model.read_bytes()
    model.write_bytes(original[:len(original) // 2])
    # In a child process: before seals, LightGBM read the torn file and aborted the interpreter (exit 134).
    (tmp_path / "data.pkl").write_bytes(pickle.dumps(data))
    repo = Path(__file__).resolve().parents[2]
    child = subprocess.run([sys.executable, "-c", _RETRAIN_IN_CHILD, str(tmp_path / "data.pkl"),
                            str(tmp_path / "models")], cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)},
                           capture_output=True, text=True, errors="replace", timeout=600)
    assert child.returncode == 0, child.stderr[-2000:]
    report = json.loads(child.stdout.strip().splitlines()[-1])
    assert report["n_trees"] == first.n_trees
    assert any(str(model) in w and "retraining" in w for w in report["warnings"])
    assert model.read_bytes() == original


def _trees(ranker) -> str:
    """The model's trees alone (the parameter block, which names the seed, left out)."""
    text = (ranker.path / "model.txt").read_text(encoding="utf-8")
    return text[:text.index("parameters:")] if "parameters:" in text else text


def test_e0_draws_nothing_random_so_its_seeds_give_one_model(data, tmp_path):
    """Why the embedded profile trains E0 with one seed: no bagging, no feature sampling, fewer rows than LightGBM's
    bin-construction sample, so its seed changes no tree; N=8's seed changes its background sample, and its trees."""
    assert _trees(train(0, data, tmp_path / "a", seed=13)) == _trees(train(0, data, tmp_path / "b", seed=14))
    assert _trees(train(N, data, tmp_path / "c", seed=13)) != _trees(train(N, data, tmp_path / "d", seed=14))



def test_the_trained_model_s_code_key_covers_the_loss_rows() -> None:
    """A model is keyed by ``code_digest("rankers.lambdamart")``: an edit to which rows enter the loss retrains it."""
    from fixtures.code import _closure

    project, _ = _closure(("rankers.lambdamart",))
    assert "rankers.lambdamart_rows" in project and "rankers.features" in project
