"""Embedded cross-encoder training: Train-only groups, caching, determinism, loadability (tiny backbone)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertModel

from fixtures.artifacts import ArtifactCorrupt, check_seal, sha256_file
from fixtures.models import splade_tiny_path
from fixtures.study import build_study
from rankers.fusion import fusion_scores
from rankers.scorers import ce_training
from rankers.scorers.ce_recipe import Recipe, train_groups
from rankers.scorers.ce_training import train_cross_encoder
from rankers.scorers.cross_encoder import CrossEncoderScorer

RECIPE = Recipe(max_length=96, train_max_length=96, negatives=3, negative_depth=5, queries_per_step=4, max_steps=4, eval_every=2,
                patience=5, max_train_queries=12, lr=1e-3)


@pytest.fixture(scope="module")
def study():
    return build_study(subset_pairs=6, subset_seed=3)


def fake_pool(study, split: str, seed: int, extra: int = 8) -> pd.DataFrame:
    """Designated pair plus ``extra`` random corpus passages per direction, with random dense/BM25 scores."""
    rng = np.random.default_rng(seed)
    corpus = sorted(study.corpus_for(split))
    rows = []
    for d in study.split(split).itertuples():
        pids = {d.preferred_pid, d.counterpart_pid, *rng.choice(corpus, extra, replace=False)}
        for pid in sorted(pids):
            rows.append((d.qid, pid, rng.uniform(0.2, 0.9), rng.uniform(0, 10)))
    f = pd.DataFrame(rows, columns=["qid", "pid", "dense_score", "bm25_score"])
    f["sparse_score"] = np.nan
    for r in ("dense", "sparse", "bm25"):
        f[f"{r}_rank"] = f.groupby("qid")[f"{r}_score"].rank(ascending=False, method="first")
    return f.sort_values(["qid", "pid"]).reset_index(drop=True)


@pytest.fixture(scope="module")
def backbone(tmp_path_factory):
    """A tiny random BERT encoder (no classification head), like the offline backbones."""
    path = tmp_path_factory.mktemp("backbone")
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(splade_tiny_path())
    BertModel(BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=64)).save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


def test_train_groups_use_train_only_and_the_fusion_head(study):
    pool = fake_pool(study, "train", 0)
    g = train_groups(study, pool, RECIPE, seed=1)
    train = study.split("train").set_index("qid")
    assert len(g.queries) == 12
    fused = pool.assign(f=fusion_scores(pool))
    for q, pos, neg, bg in zip(g.queries, g.preferred, g.counterpart, g.background):
        row = train[(train["query"] == q) & (train["preferred_pid"] == pos)].iloc[0]
        assert row["counterpart_pid"] == neg and not row["conflict"]
        head = fused[fused["qid"] == row.name].sort_values(["f", "pid"], ascending=[False, True])["pid"].tolist()
        assert bg == [p for p in head if p not in (pos, neg)][:5]
    assert set(g.corpus) == set(study.corpus_for("train"))
    assert g.digest() == train_groups(study, pool, RECIPE, seed=1).digest()
    # the seeded subset of Train directions depends on the seed
    fewer = Recipe(max_train_queries=8)
    assert len(train_groups(study, pool, fewer, seed=1).queries) == 8
    assert train_groups(study, pool, fewer, seed=1).digest() != train_groups(study, pool, fewer, seed=2).digest()


def test_training_is_cached_deterministic_and_never_reads_held_out_splits(study, backbone, tmp_path, monkeypatch):
    train_pool, dev_pool = fake_pool(study, "train", 0), fake_pool(study, "development", 1)
    asked: list[str] = []
    real_split = type(study).split
    monkeypatch.setattr(type(study), "split", lambda self, name: asked.append(name) or real_split(self, name))
    a = train_cross_encoder(study, train_pool, dev_pool, tmp_path / "a", backbone=backbone,
                            seed=5, budget=RECIPE)
    assert set(asked) <= {"train", "development"}

    m = a.manifest
    assert "NevIR-Train-tuned" in a.name and "BGE" not in a.name
    assert m["recipe"]["max_steps"] == 4 and m["seed"] == 5 and m["steps_run"] == 4
    assert [p["step"] for p in m["curve"]] == [0, 2, 4] and m["selected_step"] in (2, 4)
    assert set(m["development"]) == {"fp32", "int8"} and 0 <= m["development"]["fp32"]["window_strict"] <= 1
    assert set(m["identity"]["data"]) >= {"train_groups", "dev_pool"}
    assert json.loads((a.path / "manifest.json").read_text()) == m
    assert m["files"]["model.safetensors"] == sha256_file(a.path / "model.safetensors")
    assert check_seal(a.path / "manifest.json") and m["train_seconds"] >= m["eval_seconds"] > 0

    scorer = CrossEncoderScorer(a.path, max_length=96, device="cpu")
    assert scorer.num_labels == 1 and np.isfinite(scorer.score([("q", "p")]).scores).all()
    assert a.scorer(device="cpu").max_length == 96

    # reuse: the same inputs never retrain
    monkeypatch.setattr(ce_training, "_train", lambda *args, **kw: pytest.fail("retrained a cached model"))
    again = train_cross_encoder(study, train_pool, dev_pool, tmp_path / "a", backbone=backbone,
                                seed=5, budget=RECIPE)
    assert again.path == a.path and again.manifest == m
    monkeypatch.undo()

    # determinism: a fresh cache reproduces the weights bit for bit; another seed does not
    b = train_cross_encoder(study, train_pool, dev_pool, tmp_path / "b", backbone=backbone,
                            seed=5, budget=RECIPE)
    assert b.path.name == a.path.name
    assert (a.path / "model.safetensors").read_bytes() == (b.path / "model.safetensors").read_bytes()
    monkeypatch.setattr(ce_training, "_train", lambda *args, **kw: pytest.fail("stop after the identity"))
    with pytest.raises(pytest.fail.Exception, match="stop after the identity"):
        train_cross_encoder(study, train_pool, dev_pool, tmp_path / "a", backbone=backbone,
                            seed=6, budget=RECIPE)  # another seed is another model


def test_altered_weights_are_named_discarded_and_retrained(study, backbone, tmp_path, monkeypatch):
    """An edited cached model must never score; it is named (folder, file) and rebuilt."""
    train_pool, dev_pool = fake_pool(study, "train", 0), fake_pool(study, "development", 1)
    cache = tmp_path
    a = train_cross_encoder(study, train_pool, dev_pool, cache, backbone=backbone, seed=5, budget=RECIPE)
    weights = a.path / "model.safetensors"
    good = weights.read_bytes()
    bad = bytearray(good)
    bad[-9] ^= 0x01  # one bit inside the last tensor's data: same length, still loadable
    weights.write_bytes(bytes(bad))

    with pytest.raises(ArtifactCorrupt, match=rf"{a.path.name}.*model\.safetensors"):
        a.scorer(device="cpu")
    trained: list[int] = []
    real = ce_training._train
    monkeypatch.setattr(ce_training, "_train", lambda *args, **kw: trained.append(1) or real(*args, **kw))
    with pytest.warns(UserWarning, match=rf"{a.path.name}.*model\.safetensors.*discarded .* retraining"):
        b = train_cross_encoder(study, train_pool, dev_pool, cache, backbone=backbone, seed=5, budget=RECIPE)
    assert trained == [1] and b.path == a.path
    assert weights.read_bytes() == good  # deterministic retraining restores the exact weights

    # a folder saved without a seal (before sealing existed) is refused the same way
    (a.path / "manifest.json.sha256").unlink()
    with pytest.warns(UserWarning, match="no digest was recorded"):
        train_cross_encoder(study, train_pool, dev_pool, cache, backbone=backbone, seed=5, budget=RECIPE)
    assert trained == [1, 1]
    # an added file is as suspicious as an edited one
    (a.path / "adapter_model.safetensors").write_bytes(b"x")
    with pytest.raises(ArtifactCorrupt, match="adapter_model.safetensors"):
        a.scorer(device="cpu")


def test_budgets_and_backbones():
    assert ce_training._budget("ci").max_train_queries is not None
    assert ce_training._budget({"max_steps": 7}).max_steps == 7
    with pytest.raises(KeyError, match="unknown training budget"):
        ce_training._budget("huge")
    with pytest.raises(FileNotFoundError, match="neither one of"):
        ce_training.resolve_backbone("/nonexistent/model")
    assert ce_training.resolve_backbone("auto")[0] == ce_training.AUTO_BACKBONE
