"""``python -m harness.models``: each study model's folder for this checkout, a model that must be trained named with
its cost before anything is trained; a run's manifest names the folders it used."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from fixtures.settings import PROJECT_ROOT, Settings
from harness.models import NOT_LOADED, manifest_entry
from harness.profile import load_profile
from harness.session import Evaluation


def test_the_command_names_every_study_models_folder_and_prices_what_it_would_train() -> None:
    done = subprocess.run([sys.executable, "-m", "harness.models", "--no-train"], cwd=PROJECT_ROOT, text=True,
                          capture_output=True, timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line.split("\t") for line in done.stdout.splitlines() if line.count("\t") == 3]
    lambdamart = [r for r in rows if r[0] in ("e0", "bg8")]
    assert [r[1] for r in lambdamart] == ["LambdaMART e0, seed 13", *[f"LambdaMART bg8, seed {s}" for s in
                                                                     range(13, 18)]]
    assert all(Path(r[2], "model.txt").is_file() and r[3] == "in the cache" for r in lambdamart)
    [ce] = [r for r in rows if r[0] == "ce"]
    if ce[2] == "-":  # not trained here: its cost is said, and nothing was trained
        assert ce[3].startswith("to train, about ") and "training it takes about" in done.stdout
    else:
        assert Path(ce[2], "manifest.json").is_file() and ce[3] == "in the cache"


def test_the_manifest_names_a_models_folder_only_when_the_run_loaded_it(tmp_path: Path) -> None:
    ev = Evaluation(Settings(splits=("test",)), load_profile("embedded"), contact=False)
    assert manifest_entry(ev, "e0") == {"e0@seed13": {"model": "LambdaMART e0", "path": NOT_LOADED}}
    from rankers.kinds.lambdamart import LambdaMART

    trained = LambdaMART.trained(ev.context, 0, 13)  # what ranking E0 loads (a copy of the shipped model)
    assert manifest_entry(ev, "e0") == {"e0@seed13": {"model": "LambdaMART e0", "path": str(trained.path)}}
    assert manifest_entry(ev, "fusion") == {}
