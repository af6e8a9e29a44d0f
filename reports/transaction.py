"""Replacing a folder of results as one transaction: published results and exports both swap in this way.

``<root>/<name>`` are symlinks to ``.current/<name>``; ``.current`` is a symlink to the run that
is in place, ``.runs/<run id>``. A new run is staged in its own ``.runs/<run id>`` (held by a
lock file while a live process stages it) and committed by one atomic rename of ``.current``
(docs/protocol.md#publishing). Whatever stops the process before that rename (an exception,
SIGINT, SIGKILL, a full disk), readers see the previous run whole; a stopped run's staging
folder is removed on the way out, or, after a SIGKILL, by the next transaction on that root.
"""
from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path

from filelock import FileLock, Timeout

#: Under a root: the staged and committed runs, the symlink naming the committed one, the lock that serializes
#: swaps and clean-ups.
RUNS, CURRENT, LOCK = ".runs", ".current", ".publish.lock"


def unique_run_id() -> str:
    """A run id for a staging that names no run of its own (an export): UTC second, pid and a random part, so two
    stagings in one second and process never share a folder."""
    return f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def current_run(root: Path) -> str | None:
    """The id of the run committed under ``root`` (None when there is none)."""
    link = Path(root) / CURRENT
    return Path(os.readlink(link)).name if link.is_symlink() else None


def _replace_link(link: Path, target: str) -> None:
    """Point ``link`` at ``target`` in one atomic rename (readers see the old target or the new one)."""
    tmp = link.with_name(f".{link.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    os.symlink(target, tmp)
    os.replace(tmp, link)


def _adopt_legacy(root: Path, marker: str, skip: Iterable[str]) -> None:
    """Real folders of an older layout (``<root>/<name>/<marker>``) become the committed run, so the first swap
    replaces them like any other run's."""
    legacy = [p for p in root.iterdir() if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")
              and p.name not in set(skip) and (p / marker).is_file()]
    if not legacy or current_run(root) is not None:
        return
    folder = root / RUNS / f"legacy-{os.getpid()}"
    folder.mkdir(parents=True, exist_ok=True)
    for name in legacy:
        name.rename(folder / name.name)
    _replace_link(root / CURRENT, f"{RUNS}/{folder.name}")
    for name in legacy:
        _replace_link(name, f"{CURRENT}/{name.name}")


def _clean(root: Path) -> None:
    """Remove run folders that are neither committed nor being staged by a live process (a killed process's
    staging, the run a swap replaced), and name links that lead nowhere."""
    runs, keep = root / RUNS, current_run(root)
    for folder in sorted(runs.iterdir()) if runs.is_dir() else []:
        if not folder.is_dir() or folder.name == keep:
            continue
        lock = FileLock(str(folder) + ".lock", timeout=0)
        try:
            with lock:
                shutil.rmtree(folder, ignore_errors=True)
        except Timeout:
            continue  # another process is staging it
        Path(str(folder) + ".lock").unlink(missing_ok=True)
    for link in root.iterdir():
        if link.is_symlink() and link.name != CURRENT and not link.exists():
            link.unlink()


class StagedRun:
    """One run being staged under ``<root>/.runs/<run id>``: ``folder`` to write into, ``commit`` to swap it in,
    ``close`` (always) to drop it when it was not committed.

    Opening adopts a legacy layout (folders holding ``legacy_marker``, but those named in ``skip``; None: a root
    whose older layout has no folders to adopt, whose files the first commit replaces by links) and
    removes what killed processes left; it raises ``OSError`` or ``filelock.Timeout`` when ``root`` cannot
    be written, before anything in it changed.
    """

    def __init__(self, root: Path, run_id: str, legacy_marker: str | None, skip: Iterable[str] = ()) -> None:
        self.root, self.run_id = Path(root), run_id
        self.folder = self.root / RUNS / run_id
        self.root.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.root / LOCK)):
            if legacy_marker is not None:
                _adopt_legacy(self.root, legacy_marker, skip)
            _clean(self.root)
        self.folder.parent.mkdir(parents=True, exist_ok=True)
        self._own = FileLock(str(self.folder) + ".lock", timeout=0)
        self._own.acquire()
        self.folder.mkdir(exist_ok=True)

    @property
    def previous(self) -> Path | None:
        """The folder of the run committed before this one, if any."""
        run = current_run(self.root)
        return self.root / RUNS / run if run is not None and run != self.run_id else None

    def commit(self, names: Iterable[str]) -> None:
        """Swap the staged run in: the ``names`` links first (until the swap they lead to the previous run's
        folders), then ``.current`` in one atomic rename, the commit."""
        with FileLock(str(self.root / LOCK)):
            for name in names:
                if not (self.root / name).is_symlink():
                    _replace_link(self.root / name, f"{CURRENT}/{name}")
            _replace_link(self.root / CURRENT, f"{RUNS}/{self.run_id}")

    @property
    def committed(self) -> bool:
        return current_run(self.root) == self.run_id

    def close(self) -> None:
        """Remove the staged run unless it was committed, then the run it replaced (a leftover goes next time)."""
        committed = self.committed
        if not committed:
            shutil.rmtree(self.folder, ignore_errors=True)
        self._own.release()
        if not committed:
            Path(str(self.folder) + ".lock").unlink(missing_ok=True)
        with suppress(OSError), FileLock(str(self.root / LOCK)):
            _clean(self.root)
