"""The study's models and judgments shipped in ``data/reference/`` (``rankers.shipped``, docs/protocol.md#shipped-reference).

They stand in for training only where this code would compute exactly them, so the checks are:
- what ships is what this code reads (a code change that moves a key without refreezing fails here, naming the
  command that refreezes);
- a model retrained here, shipping ignored, is the shipped model byte for byte (in a fresh interpreter, and with
  other thread counts: LightGBM is pinned to one thread, so the threads a machine has cannot move it);
- a shipped file that fails its seal is refused by name and never used;
- a run on an empty cache trains nothing and judges nothing of the study, and a second run with another added
  ranker computes only that ranker's stages (the stages entered are counted).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from fixtures.settings import PROJECT_ROOT
from harness.freeze_reference import SCOPES, SPLITS, model_differences, study_session
from rankers.shipped import SHIPPED_DIR, ShippedJudgments, ShippedWarning, install_model, judgments_path

REFREEZE = "python -m harness.freeze_reference, then commit data/reference/"
ENV = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """The embedded study on an empty cache, reading what the checkout ships (training refused: see ``no_training``)."""
    return study_session(tmp_path_factory.mktemp("cache"))


@pytest.fixture
def no_training(monkeypatch):
    """Training either model fails the test: what ships must stand in for it."""
    import rankers.lambdamart
    import rankers.scorers.ce_training

    def refuse(*args, **kwargs):
        raise AssertionError(f"a study model was trained: the shipped files do not match this code ({REFREEZE})")
    monkeypatch.setattr(rankers.lambdamart, "_fit", refuse)
    monkeypatch.setattr(rankers.scorers.ce_training, "train_cross_encoder", refuse)


def test_every_study_model_ships_for_this_code(session, no_training) -> None:
    """Each LambdaMART model the study reads (variants, seeds, perturbed copies) is installed from the checkout, and
    nothing else lies in ``data/reference/lambdamart``."""
    ev = session
    ev.context = replace(ev.context, shipped=True)
    folders = []
    for decl in (d for d in ev.profile.ordered() if d.kind == "lambdamart"):
        for seed in ev.seeds(decl.name):
            for perturbed in (False, True):
                trained = decl.ranker_kind.trained(ev.context, int(decl.options["background"]), seed, perturbed)
                assert trained.manifest["seed"] == seed
                folders.append(trained.path.name)
    assert sorted(p.name for p in (SHIPPED_DIR / "lambdamart").iterdir()) == sorted(folders), REFREEZE


def test_the_cross_encoder_judgments_ship_for_this_code(session, no_training) -> None:
    """The trained cross-encoder's judgments of every window and designated pair the study asks are shipped under
    its identity: reading them trains and loads nothing, and judges nothing now."""
    ev = session
    ev.context = replace(ev.context, shipped=True)
    decl = ev.decl("ce")
    shipped = ShippedJudgments.find(decl.ranker_kind.identity(decl, ev.context))
    assert shipped is not None, f"no judgments ship for the cross-encoder's identity ({REFREEZE})"
    for split in SPLITS:
        for scope in SCOPES:
            scored = ev.text_scores(split, "ce", scope)
            assert scored.n_scored == 0 and scored.n_unavailable == 0, (split, scope)
            assert scored.model_key == shipped.model_key


def test_what_ships_names_no_path_of_this_checkout() -> None:
    """A shipped key must be the key of every clone, wherever it lies: no absolute path of the checkout enters it
    (the data files' paths are recorded relative to the checkout, ``fixtures.study.portable_path``)."""
    texts = [p.read_text(encoding="utf-8") for p in sorted(SHIPPED_DIR.rglob("*.json"))]
    assert texts, "nothing ships"
    assert not [t for t in texts if str(PROJECT_ROOT) in t], f"a shipped key names {PROJECT_ROOT}"


def test_a_retrained_model_is_the_shipped_one(tmp_path) -> None:
    """E0 and N=8 (seed 13) retrained with shipping off, in a fresh interpreter with two other thread settings, give the
    shipped model file byte for byte and the same manifest but for its training seconds."""
    probe = f"""
import json, sys
from harness.freeze_reference import study_session
ev = study_session(__import__("pathlib").Path(sys.argv[1]))
out = {{}}
for name in ("e0", "bg8"):
    decl = ev.decl(name)
    trained = decl.ranker_kind.trained(ev.context, int(decl.options["background"]), ev.settings.seed)
    out[name] = str(trained.path)
print(json.dumps(out))
"""
    for threads in ("1", "3"):
        cache = tmp_path / f"threads{threads}"
        env = {**ENV, "OMP_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads}
        done = subprocess.run([sys.executable, "-c", probe, str(cache)], cwd=PROJECT_ROOT, env=env,
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        for name, path in json.loads(done.stdout.strip().splitlines()[-1]).items():
            assert model_differences(Path(path)) == [], f"{name} with {threads} thread(s) ({REFREEZE})"


def test_an_edited_shipped_model_is_refused_and_not_installed(tmp_path) -> None:
    source = next((SHIPPED_DIR / "lambdamart").iterdir())
    copy = tmp_path / "reference" / "lambdamart" / source.name
    shutil.copytree(source, copy)
    text = (copy / "model.txt").read_text()
    (copy / "model.txt").write_text(text.replace("Tree=0", "Tree=0 ", 1))
    out = tmp_path / "cache" / source.name
    out.mkdir(parents=True)
    with pytest.warns(ShippedWarning, match=r"model\.txt"):
        assert not install_model(source.name, out, ("model.txt", "manifest.json"), tmp_path / "reference")
    assert not any(out.iterdir()), "nothing of a refused shipped model reaches the cache"
    assert install_model(source.name, out, ("model.txt", "manifest.json"))  # the checkout's own copy is installed
    assert (out / "model.txt").read_bytes() == (source / "model.txt").read_bytes()


def test_edited_shipped_judgments_are_refused(tmp_path) -> None:
    [manifest] = [p for p in (SHIPPED_DIR / "judgments").glob("*.json")]
    identity = json.loads(manifest.read_text())["identity"]
    target = judgments_path(identity, tmp_path)
    target.parent.mkdir(parents=True)
    for suffix in (".json", ".json.sha256", ".parquet", ".parquet.sha256"):
        shutil.copyfile(manifest.with_name(manifest.stem + suffix), target.with_name(target.stem + suffix))
    assert ShippedJudgments.find(identity, tmp_path) is not None
    frame = pd.read_parquet(target.with_suffix(".parquet"))
    frame.loc[0, "score"] += 1.0
    frame.to_parquet(target.with_suffix(".parquet"), index=False)
    with pytest.warns(ShippedWarning, match=r"judgments table"):
        assert ShippedJudgments.find(identity, tmp_path) is None


def test_an_added_ranker_on_an_empty_cache_trains_nothing_and_then_recomputes_no_study_stage(empty_cache_runs) -> None:
    """README step 3's shape on an empty cache: the study's models and judgments come from the checkout; a second
    run with another added ranker enters only that ranker's stages."""
    first, second = empty_cache_runs.runs
    for run, name in ((first, "mine"), (second, "theirs")):
        assert run["failures"] == [], run["failures"]
        assert {"fusion", "e0", "bg8", "ce", name} <= set(run["rankers"])
    # Training either model raises in the probe, so an empty failures list says no model was trained.
    assert not [s for s in first["stages"] if s["stage"].startswith("score_ce") and s["scored_now"]]
    computed = [s["stage"] for s in second["stages"] if s["stage"].startswith(("rank_", "train_", "pool_features"))
                or s["stage"].startswith("score_") and s["scored_now"]]
    assert [s for s in computed if "theirs" not in s] == [], computed
    assert [s for s in computed if "theirs" in s], "the added ranker is scored"
