"""A notebook computes what the command line computes: importing ``harness.run`` pins the CPU kernels before torch
loads, as the root conftest does, so both paths run the same kernels, key the same cache entries and score
bit-identically; a process whose torch was loaded first with other kernels is refused before any work.

Each path runs in a fresh interpreter (a kernel family is chosen when torch first loads): the command line's order
(``pin_cpu_kernels`` then torch), the notebook's (``import harness.run`` then torch), and a notebook that loaded
torch first and computed with it under another kernel family (emulated with ``ATEN_CPU_CAPABILITY=default``, the
scalar kernels). Importing torch alone chooses nothing: ATen reads the setting when it first computes, so a notebook
that imported torch but computed nothing yet still runs the pinned kernels.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

from fixtures.settings import CPU_KERNELS, PROJECT_ROOT

pytestmark = pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                                reason="the kernel family is pinned on x86-64 only")

#: Scores a few token sequences with the SPLADE-tiny encoder the cross-encoder is tuned from, and prints the kernel
#: family, the score cache key of a python ranker handed over as an object, and the scores' exact bytes.
PROBE = """
import hashlib, json, torch
from transformers import AutoModelForMaskedLM, AutoTokenizer
from fixtures.models import resolve_sparse_model
from rankers.scorers.python_scorer import load_python_object

class Overlap:
    model_key = "overlap-v1"
    def score(self, inputs):
        return [float(len(set(q.split()) & set(p.split()))) for q, p in inputs]

path = resolve_sparse_model(None)
torch.manual_seed(0)
model, tok = AutoModelForMaskedLM.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)
batch = tok(["the drug is not approved for children", "only if the box is unopened"] * 4,
            ["approved for adults only", "refunds need an unopened box"] * 4, return_tensors="pt", padding=True)
with torch.inference_mode():
    logits = model(**batch).logits.float().numpy()
print(json.dumps({"kernels": str(torch.backends.cpu.get_cpu_capability()),
                  "key": load_python_object(Overlap(), ranker="mine").scorer.model_key,
                  "scores": hashlib.sha256(logits.tobytes()).hexdigest()}))
"""


def _run(prelude: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", prelude + PROBE], cwd=PROJECT_ROOT, capture_output=True, text=True,
                          env=env, timeout=600)


def _environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CPU_KERNELS}  # no setting of the caller's leaks in
    return {**env, "PYTHONPATH": str(PROJECT_ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **extra}


def test_the_notebook_path_runs_the_command_lines_kernels_keys_and_scores() -> None:
    cli = _run("from fixtures.settings import pin_cpu_kernels\npin_cpu_kernels()\n", _environment())
    notebook = _run("import harness.run\n", _environment())
    assert cli.returncode == 0 and notebook.returncode == 0, cli.stderr[-2000:] + notebook.stderr[-2000:]
    a, b = json.loads(cli.stdout.strip().splitlines()[-1]), json.loads(notebook.stdout.strip().splitlines()[-1])
    assert a["kernels"].lower() == CPU_KERNELS["ATEN_CPU_CAPABILITY"] and a == b


def test_a_notebook_that_loaded_torch_first_with_other_kernels_is_refused_before_any_work(tmp_path) -> None:
    code = ("import os, torch\n"
            "torch.ones(64).exp()\n"  # torch has computed: its kernel family is chosen (ATen reads the setting lazily)
            "os.environ.pop('ATEN_CPU_CAPABILITY')\n"  # a setting the notebook no longer shows; torch kept it
            "from harness.options import OptionError\n"
            "from harness.run import evaluate\n"
            "try:\n"
            f"    evaluate('embedded', splits=['test'], cache_dir={str(tmp_path / 'cache')!r})\n"
            "except OptionError as exc:\n"
            "    print('refused:', exc)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600,
                          env=_environment(ATEN_CPU_CAPABILITY="default"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "refused: torch was imported before harness.run and runs DEFAULT kernels" in done.stdout, done.stdout
    assert not (tmp_path / "cache").exists()  # nothing was computed
