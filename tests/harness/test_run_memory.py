"""Five ``evaluate()`` calls in one process hold no more memory than one: a session's values live in the session
object (``harness.memo.per_instance``), so each run's pools, frames and rankings go with its record's last use.

Measured in a fresh interpreter (resident set size from ``/proc/self/status`` after a garbage collection), on the CI
subset with the reference rankers, so the first call pays for what every later call reads from the caches.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.settings import PROJECT_ROOT

PROBE = """
import gc, json, re
from harness.run import evaluate

def rss_mib():
    gc.collect()
    status = open("/proc/self/status").read()
    return int(re.search(r"VmRSS:\\s+(\\d+) kB", status).group(1)) / 1024

sizes = []
for _ in range(5):
    record = evaluate("embedded", splits=["test"], subset_pairs=24, rankers=["fusion", "e0"])
    assert len(record["test"].rows("table2")) == 2
    del record
    sizes.append(rss_mib())
print(json.dumps(sizes))
"""


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads the resident set size from /proc")
def test_five_evaluations_hold_no_more_memory_than_one() -> None:
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=PROJECT_ROOT, capture_output=True, text=True, env=env,
                          timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    sizes = json.loads(done.stdout.strip().splitlines()[-1])
    assert sizes[-1] <= 1.2 * sizes[0], f"resident MiB after each of five evaluate() calls: {sizes}"
