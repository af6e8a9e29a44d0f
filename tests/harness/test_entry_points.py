"""Every ``python -m`` command of the suite keeps the command-line conventions: ``--help`` prints a usage line and
exits 0; a usage error exits 2 with one line saying what is wrong, before any work.

Each command runs in a subprocess, as a user types it; the list is checked against the modules that have a
``__main__`` block, so a new command cannot miss these checks.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.settings import PROJECT_ROOT

#: Each command -> arguments with one usage error (its required arguments given, so the error is the bad one) and
#: a fragment of the one line that names it.
COMMANDS: dict[str, tuple[list[str], str]] = {
    "harness.batch": (["bogus"], "invalid choice: 'bogus'"),
    "harness.batch export": (["--out", "unused", "--no-such-option"], "unrecognized arguments: --no-such-option"),
    "harness.batch import": (["unused.jsonl", "--no-such-option"], "unrecognized arguments: --no-such-option"),
    "harness.export": (["--out", "unused", "--no-such-option"], "unrecognized arguments: --no-such-option"),
    "harness.plan": (["--sample", "s", "--effect", "1", "--no-such-option"],
                     "unrecognized arguments: --no-such-option"),
    "fixtures.freeze_pools": (["--no-such-option"], "unrecognized arguments: --no-such-option"),
    "harness.freeze_reference": (["--no-such-option"], "unrecognized arguments: --no-such-option"),
    "fixtures.datasets": (["--export-nevir", "unused", "--no-such-option"], "unrecognized arguments: --no-such-option"),
    "harness.stub_chat": (["--port", "0", "--no-such-option"], "unrecognized arguments: --no-such-option"),
    "harness.models": (["--no-train", "--no-such-option"], "unrecognized arguments: --no-such-option"),
}
#: Packages whose modules a user runs (tests/support holds test-only helpers).
PACKAGES = ("fixtures", "rankers", "reports", "harness")


def _run(command: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *command.split(), *args], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "NEVIR_CACHE_DIR": str(cwd / "cache")})


def test_every_main_module_is_checked() -> None:
    mains = {".".join(p.relative_to(PROJECT_ROOT).with_suffix("").parts).removesuffix(".__main__")
             for package in PACKAGES for p in (PROJECT_ROOT / package).rglob("*.py")
             if re.search(r"^if __name__ == .__main__.:", p.read_text(encoding="utf-8"), re.M)}
    assert mains == {c.split()[0] for c in COMMANDS}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_help_prints_usage_and_exits_0(command: str, tmp_path: Path) -> None:
    done = _run(command, ["--help"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: python -m {command} "), done.stdout[:200]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_usage_error_exits_2_with_one_line_naming_it(command: str, tmp_path: Path) -> None:
    args, fragment = COMMANDS[command]
    done = _run(command, args, tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and fragment in errors[0] and done.stderr.splitlines()[-1] == errors[0], done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "cache").exists()  # refused before any work
