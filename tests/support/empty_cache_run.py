"""README step 3 on an empty cache, once per test session: the embedded study on the CI subset's Test split with one
added ranker, twice (another ranker the second time), the second run published. Two tests read it: the stages each
run entered (``tests/rankers/test_shipped.py``: nothing of the study is trained or judged) and every file the run
left in its cache (``tests/test_stores.py``: each belongs to a store of docs/reproducibility.md#what-each-store-holds
and verifies under the user's key only).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from fixtures.settings import PROJECT_ROOT

ENV = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}

SCRIPT = """
import json, sys
from pathlib import Path
import harness.run
from harness.stages import StageClock
import rankers.lambdamart, rankers.scorers.ce_training

def refuse(*args, **kwargs):
    raise AssertionError("a study model was trained")
rankers.lambdamart._fit = refuse
rankers.scorers.ce_training.train_cross_encoder = refuse
entered = []
stage = StageClock.stage
def counting(self, split, name, **info):
    context = stage(self, split, name, **info)
    class Kept:
        def __enter__(self):
            record = context.__enter__()
            entered.append(record)
            return record
        def __exit__(self, *exc):
            return context.__exit__(*exc)
    return Kept()
StageClock.stage = counting

class Overlap:
    def __init__(self, key):
        self.model_key = key
    def score(self, inputs):
        return [len(set(q.lower().split()) & set(p.lower().split())) / 10 for q, p in inputs]

runs = []
for name in ("mine", "theirs"):
    entered.clear()
    record = harness.run.evaluate("embedded", add={name: Overlap(f"overlap-{name}")}, splits=["test"],
                                  subset_pairs=24, grader_sample=4, exclude_marks=["llm"], cache_dir=sys.argv[1])
    runs.append({"stages": [dict(r) for r in entered], "failures": record.failures.astype(str).to_dict("records"),
                 "rankers": sorted(set(record.table2["ranker"]))})
harness.run.publish(record, sys.argv[2], cache_dir=sys.argv[1])
print(json.dumps(runs))
"""


@dataclass(frozen=True)
class EmptyCacheRuns:
    """What each run entered and returned (``stages``, ``failures``, ``rankers``), and the folders they used."""

    runs: list[dict]
    cache: Path
    results: Path


def run_on_empty_cache(root: Path) -> EmptyCacheRuns:
    """The two runs, in a fresh interpreter (so nothing of this process is reused), into ``root/cache``."""
    cache, results = root / "cache", root / "results"
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(cache), str(results)], cwd=PROJECT_ROOT, env=ENV,
                          capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-4000:]
    return EmptyCacheRuns(json.loads(done.stdout.strip().splitlines()[-1]), cache, results)
