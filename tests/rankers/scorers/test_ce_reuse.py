"""A subset run's cross-encoder: the full run's model when it is cached (its key known before any training), else
the CI budget's, chosen once per run (docs/protocol.md#cross-encoder)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from rankers.kinds import kind
from rankers.scorers import ce_store, ce_training
from rankers.scorers.ce_store import is_trained
from rankers.scorers.ce_training import plan_training, train_cross_encoder
from tests.rankers.scorers.test_ce_training import RECIPE, backbone, fake_pool, study  # noqa: F401 (fixtures)


def test_the_plan_names_the_folder_training_writes_and_says_whether_it_is_trained(study, backbone, tmp_path):
    train_pool, dev_pool = fake_pool(study, "train", 0), fake_pool(study, "development", 1)
    plan = plan_training(study, train_pool, dev_pool, tmp_path, backbone=backbone, seed=5, budget=RECIPE)
    assert not is_trained(plan.out) and not tmp_path.joinpath(plan.out.name).exists()  # planning writes nothing
    trained = train_cross_encoder(study, train_pool, dev_pool, tmp_path, backbone=backbone, seed=5, budget=RECIPE)
    assert trained.path == plan.out and is_trained(plan.out)
    assert trained.manifest["identity"]["data"] == plan.identity["data"]
    (plan.out / "model.safetensors").write_bytes(b"altered")
    assert not is_trained(plan.out)  # a corrupt model would be retrained, so it is not there to read


STUDY = SimpleNamespace(data_provenance=lambda: {"nevir": "the data"})


def _ctx(tmp_path, subset: bool, pools: dict, memo: dict, shipped: bool = False) -> SimpleNamespace:
    shared: dict = {}
    return SimpleNamespace(subset=subset, seed=13, shipped=shipped, study=STUDY, pool=pools.__getitem__,
                           pool_digest=lambda s: f"digest-{s}", cache=lambda *parts: tmp_path.joinpath(*parts),
                           shared=lambda key, build: shared[key] if key in shared else shared.setdefault(key, build()),
                           memo=lambda label, key, compute: memo[repr((label, key))] if repr((label, key)) in memo
                           else memo.setdefault(repr((label, key)), compute()))


@pytest.mark.parametrize(("full_cached", "expected"), [(True, "full"), (False, "ci")])
def test_a_subset_run_reads_the_full_model_when_cached_and_decides_once(tmp_path, monkeypatch, full_cached,
                                                                        expected):
    planned: list[tuple] = []
    trained = {tmp_path / "full": full_cached}

    def fake_plan(study, train_pool, dev_pool, cache_dir, *, seed, budget, backbone="auto"):
        planned.append((study, train_pool, dev_pool, cache_dir, seed, budget))
        return SimpleNamespace(out=tmp_path / budget)

    monkeypatch.setattr(ce_training, "plan_training", fake_plan)
    monkeypatch.setattr(ce_store, "is_trained", lambda folder: trained.get(folder, False))
    ce = kind("cross_encoder")
    decl = SimpleNamespace(options={"model": "trained"}, name="ce")
    memo: dict = {}
    ctx = _ctx(tmp_path, True, {"train": "train pool", "development": "dev pool"}, memo)
    assert ce.budget(decl, ctx) == expected
    assert planned == [(STUDY, "train pool", "dev pool", tmp_path / "models" / "cross-encoder", 13, "full")]
    trained[tmp_path / "full"] = not full_cached  # another process saves (or drops) the full model during the run
    assert ce.budget(decl, ctx) == expected and len(planned) == 1  # the run keeps the model its keys name
    # A later run reads where the full model is from the memo: no training code is loaded to plan it again.
    assert ce.budget(decl, _ctx(tmp_path, True, {"train": "train pool", "development": "dev pool"}, memo)) == \
        ("full" if not full_cached else "ci") and len(planned) == 1
    assert ce.budget(decl, _ctx(tmp_path, False, {}, memo)) == "full"  # a full run always trains or reads the full one


def test_a_subset_run_reads_the_shipped_judgments_of_the_full_model_and_trains_no_budget(tmp_path, monkeypatch):
    """With the full model's judgments shipped (rankers.shipped), a subset run on a cache without any model takes the
    full budget and plans no training; with shipping off (``--retrain``) it falls back to the CI budget."""
    from rankers import shipped as shipped_module  # the module whose lookup the test steers

    planned: list[tuple] = []
    found: list[dict] = []

    def fake_plan(study, train_pool, dev_pool, cache_dir, *, seed, budget, backbone="auto"):
        planned.append((budget,))
        return SimpleNamespace(out=tmp_path / budget)

    def fake_find(identity, shipped_dir=None):
        found.append(identity)
        return SimpleNamespace(model_key="shipped-key") if identity.get("budget") == "full" else None

    monkeypatch.setattr(ce_training, "plan_training", fake_plan)
    monkeypatch.setattr(ce_store, "is_trained", lambda folder: False)
    monkeypatch.setattr(shipped_module.ShippedJudgments, "find", staticmethod(fake_find))
    ce = kind("cross_encoder")
    decl = SimpleNamespace(options={"model": "trained"}, name="ce", scorer_options={"model": "trained"})
    pools = {"train": "train pool", "development": "dev pool"}
    assert ce.budget(decl, _ctx(tmp_path, True, pools, {}, shipped=True)) == "full"
    assert planned == [] and found and found[-1]["pools"] == ["digest-train", "digest-development"]
    assert ce.budget(decl, _ctx(tmp_path, True, pools, {}, shipped=False)) == "ci"
    assert planned == [("full",)]
