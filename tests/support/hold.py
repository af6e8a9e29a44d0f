"""Holding a run at the event a fault test is about, so the test signals it there, never after a guessed delay.

A run started with ``-p tests.support.hold`` and ``NEVIR_HOLD=<point>`` (plus the two files of
``Hold.env``) stops when it reaches that point: it writes the marker file, then waits until the
release file exists. The test waits for the marker (an event the run itself produced), sends its
signal, and releases the run where the signal is deferred (publishing defers SIGINT and SIGTERM to its
next checkpoint). However busy the machine, the signal lands at the point under test.

Points: ``scored`` (the first chunk of scores has just been committed to the score cache),
``publish:<split>`` (staging ``<split>``: its tables are written, its figures not yet), ``export:<split>``
(exporting ``<split>``: its files are staged, not yet swapped in), ``swap`` and ``swapped`` (inside a
transaction's commit, ``reports.transaction``: just before and just after the rename of ``.current`` that
swaps the staged run in). Test-only code: nothing in the suite knows about it.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

POINT, MARKER, RELEASE = "NEVIR_HOLD", "NEVIR_HOLD_MARKER", "NEVIR_HOLD_RELEASE"
#: How long a held run waits for its release before it fails (a test that never releases it must not hang CI).
HOLD_LIMIT_S = 900.0
#: How often a held run and a waiting test look at the other's file.
POLL_S = 0.01


def hold_here(marker: Path, release: Path) -> None:
    """Write ``marker``, then wait until ``release`` exists (a signal may end the wait first)."""
    Path(marker).touch()
    deadline = time.monotonic() + HOLD_LIMIT_S
    while not Path(release).exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"held for {HOLD_LIMIT_S:.0f} s at {os.environ.get(POINT)!r}; {release} never appeared")
        time.sleep(POLL_S)


def _hold_once(owner: object, name: str, where) -> None:
    """Wrap ``owner.name`` so that the first call for which ``where(*args)`` says "before" or "after" holds the
    run there (before the real call or after it returns)."""
    real, done = getattr(owner, name), []

    def held(*args, **kwargs):
        at = None if done else where(*args)
        if at:
            done.append(at)
        if at == "before":
            hold_here(Path(os.environ[MARKER]), Path(os.environ[RELEASE]))
        result = real(*args, **kwargs)
        if at == "after":
            hold_here(Path(os.environ[MARKER]), Path(os.environ[RELEASE]))
        return result

    setattr(owner, name, held)


def arm(point: str | None = None) -> None:
    """Install the hold ``point`` (default: ``NEVIR_HOLD``) in this process.

    A held run is interrupted as a user's Ctrl-C would interrupt it, so it gets Python's SIGINT handler
    back where it inherited SIGINT ignored (a test session started as a shell's background job: its
    children would otherwise never see the interrupt).
    """
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    point = os.environ.get(POINT, "") if point is None else point
    kind, _, split = point.partition(":")
    if kind == "scored":
        from rankers.scorers.cache import ScoreCache

        _hold_once(ScoreCache, "put_many", lambda *args: "after")
    elif kind == "publish":
        import reports.writer as writer

        _hold_once(writer, "write_figures", lambda out, *rest: "before" if Path(out).name == split else None)
    elif kind == "export":
        import harness.export as export

        _hold_once(export, "export_split", lambda ev, name, *rest: "after" if name == split else None)
    elif kind in ("swap", "swapped"):
        import reports.transaction as transaction

        at = "before" if kind == "swap" else "after"
        _hold_once(transaction, "_replace_link", lambda link, target: at if link.name == transaction.CURRENT else None)
    elif point:
        raise ValueError(f"{POINT}={point!r}: no such hold point")


def pytest_configure(config: pytest.Config) -> None:
    arm()


@dataclass(frozen=True)
class Hold:
    """The two files of one hold in ``folder``, and the environment that arms it for ``point``."""

    folder: Path
    point: str = ""  # empty: the run calls ``hold_here`` itself where it holds

    @property
    def marker(self) -> Path:
        return self.folder / "held"

    @property
    def released(self) -> Path:
        return self.folder / "release"

    def env(self) -> dict[str, str]:
        self.folder.mkdir(parents=True, exist_ok=True)
        return {POINT: self.point, MARKER: str(self.marker), RELEASE: str(self.released)} if self.point else \
            {MARKER: str(self.marker), RELEASE: str(self.released)}

    def reached(self, proc: subprocess.Popen) -> bool:
        """Wait until the run is held (True) or has ended without reaching the point (False)."""
        while proc.poll() is None:
            if self.marker.exists():
                return True
            time.sleep(POLL_S)
        return self.marker.exists()

    def release(self) -> None:
        self.released.touch()
