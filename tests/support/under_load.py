"""Run fault tests again and again while CPU burners keep every core busy: a fault test that synchronizes on
events passes however slow the machine is, one that races a clock does not.

``python -m tests.support.under_load [--burners 2] [--repeat 10] NODE_ID ...`` starts the burners (one busy
process each, never a server, never any network), runs ``pytest NODE_ID ...`` ``--repeat`` times in a row with
the suite's CI flags, prints one line per round and a closing ``N passed, N failed`` line, stops the burners and
exits non-zero if any round failed. Test-only code: nothing in the suite imports it.
"""
from __future__ import annotations

import argparse
import multiprocessing
import subprocess
import sys
import time

from fixtures.settings import PROJECT_ROOT


def _burn() -> None:
    """Spin until terminated: one core's worth of load."""
    x = 0
    while True:
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burners", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("nodes", nargs="+", help="pytest node ids")
    args = parser.parse_args(argv)
    burners = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(args.burners)]
    for b in burners:
        b.start()
    passed = failed = 0
    try:
        for round_ in range(1, args.repeat + 1):
            start = time.monotonic()
            done = subprocess.run([sys.executable, "-m", "pytest", *args.nodes, "-q", "-p", "no:cacheprovider",
                                   "--benchmark-disable", "--subset-pairs", "24", "--grader-sample", "4"],
                                  cwd=PROJECT_ROOT, capture_output=True, text=True)
            last = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
            ok = done.returncode == 0
            passed, failed = passed + ok, failed + (not ok)
            print(f"round {round_}/{args.repeat} with {args.burners} burners: exit {done.returncode} in "
                  f"{time.monotonic() - start:.0f} s: {last}", flush=True)
            if not ok:
                print(done.stdout[-4000:], done.stderr[-2000:], sep="\n", flush=True)
    finally:
        for b in burners:
            b.terminate()
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
